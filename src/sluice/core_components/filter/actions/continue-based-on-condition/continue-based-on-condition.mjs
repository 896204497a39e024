// Sluice core component. Pipedream's `filter-continue-based-on-condition`: a condition on a value; a run that
// stops here ends with `$.flow.exit` (a success, not an error).

import { check, props } from "../../common/conditions.mjs";

export default {
  key: "filter-continue-based-on-condition",
  name: "Continue Based on Condition",
  description: "Continue the workflow only if a condition is met; otherwise end the run here (its later steps do not run).",
  version: "0.1.0",
  type: "action",
  props,
  async run({ $ }) {
    const met = check(this.condition, this.operand1, this.operand2, this.caseSensitive);
    if (!met) $.flow.exit(`the condition is not met: ${this.condition}`);
    $.export("$summary", met ? "The condition is met: the workflow continues" : "");
    return { met };
  },
};
