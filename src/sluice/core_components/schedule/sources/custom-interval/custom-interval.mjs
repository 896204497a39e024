// Sluice core component. Pipedream's `schedule-custom-interval`: the timer's tick is the
// event (`{timestamp, interval_seconds}`; a cron tick adds `cron` and the tick's time in the
// configured time zone and in UTC).
export default {
  key: "schedule-custom-interval",
  name: "Custom Interval",
  description:
    "Trigger every N seconds, or on a cron expression in a time zone of your choice.",
  version: "0.1.0",
  type: "source",
  props: {
    cron: {
      type: "$.interface.timer",
      label: "Schedule",
      description: "Every N seconds, or a cron expression (five fields) with a time zone.",
      default: { intervalSeconds: 900 },
    },
  },
  async run(event) {
    const at = new Date((event?.timestamp ?? Date.now() / 1000) * 1000).toISOString();
    this.$emit(event, { summary: `Tick at ${at}` });
  },
};
