// Sluice core component. Pipedream's `delay-delay-workflow`: the run pauses durably
// (`$.flow.delay`) and the next step runs after the delay, even across a restart.
const UNITS = {
  milliseconds: 1,
  seconds: 1000,
  minutes: 60 * 1000,
  hours: 60 * 60 * 1000,
  days: 24 * 60 * 60 * 1000,
  weeks: 7 * 24 * 60 * 60 * 1000,
};

export default {
  key: "delay-delay-workflow",
  name: "Delay Workflow",
  description: "Delay the execution of your workflow for a specific amount of time.",
  version: "0.1.0",
  type: "action",
  props: {
    delayDurationValue: {
      type: "integer",
      label: "Duration to delay (value)",
      description: "How long to delay the workflow, in the unit below.",
      min: 0,
    },
    delayDurationUnit: {
      type: "string",
      label: "Duration to delay (unit)",
      description: "The unit of the value above.",
      options: Object.keys(UNITS),
      optional: true,
      default: "seconds",
    },
  },
  async run({ $ }) {
    const unit = this.delayDurationUnit || "seconds";
    const factor = UNITS[unit];
    if (!factor) throw new Error(`unknown unit ${JSON.stringify(unit)}: one of ${Object.keys(UNITS).join(", ")}`);
    const ms = Number(this.delayDurationValue) * factor;
    console.log(`${this.delayDurationValue} ${unit} = ${ms} ms`);
    $.export("$summary", `Delaying the workflow for ${this.delayDurationValue} ${unit}`);
    return $.flow.delay(ms);
  },
};
