// Sluice core component. Pipedream's `schedule-daily`: a cron timer with a time zone; the
// tick is the event (`{timestamp, interval_seconds, cron, timezone_configured, timezone_utc}`).
export default {
  key: "schedule-daily",
  name: "Daily",
  description: "Trigger every day, at the time and in the time zone you choose (cron, 09:00 UTC by default).",
  version: "0.1.0",
  type: "source",
  props: {
    cron: {
      type: "$.interface.timer",
      label: "Schedule",
      description: "A cron expression (minute hour day-of-month month day-of-week) and its time zone.",
      default: { cron: "0 9 * * *", timezone: "UTC" },
    },
  },
  async run(event) {
    const at = new Date((event?.timestamp ?? Date.now() / 1000) * 1000).toISOString();
    this.$emit(event, { summary: `Tick at ${at}` });
  },
};
