// Sluice core component. Pipedream's `filter-end-based-on-condition`: a condition on a value; a run that
// stops here ends with `$.flow.exit` (a success, not an error).

import { check, props } from "../../common/conditions.mjs";

export default {
  key: "filter-end-based-on-condition",
  name: "End Based on Condition",
  description: "End the workflow if a condition is met (its later steps do not run); otherwise continue.",
  version: "0.1.0",
  type: "action",
  props,
  async run({ $ }) {
    const met = check(this.condition, this.operand1, this.operand2, this.caseSensitive);
    if (met) $.flow.exit(`the condition is met: ${this.condition}`);
    $.export("$summary", "The condition is not met: the workflow continues");
    return { met };
  },
};
