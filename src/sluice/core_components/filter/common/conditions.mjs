// The conditions of the filter actions (Sluice core components), shared by both.
const CONDITIONS = [
  { label: "Equals", value: "equals" },
  { label: "Does not equal", value: "not_equals" },
  { label: "Contains (text)", value: "contains" },
  { label: "Does not contain (text)", value: "not_contains" },
  { label: "Starts with (text)", value: "starts_with" },
  { label: "Ends with (text)", value: "ends_with" },
  { label: "Matches the regular expression", value: "matches" },
  { label: "Greater than (number)", value: "greater_than" },
  { label: "Less than (number)", value: "less_than" },
  { label: "Exists (not empty)", value: "exists" },
  { label: "Does not exist (empty)", value: "not_exists" },
  { label: "Is true", value: "is_true" },
  { label: "Is false", value: "is_false" },
];

function text(value, caseSensitive) {
  const s = typeof value === "string" ? value : JSON.stringify(value ?? "");
  return caseSensitive ? s : s.toLowerCase();
}

export function check(condition, a, b, caseSensitive) {
  switch (condition) {
    case "equals":
      return typeof a === "string" || typeof b === "string" ? text(a, caseSensitive) === text(b, caseSensitive) : JSON.stringify(a) === JSON.stringify(b);
    case "not_equals":
      return !check("equals", a, b, caseSensitive);
    case "contains":
      return text(a, caseSensitive).includes(text(b, caseSensitive));
    case "not_contains":
      return !text(a, caseSensitive).includes(text(b, caseSensitive));
    case "starts_with":
      return text(a, caseSensitive).startsWith(text(b, caseSensitive));
    case "ends_with":
      return text(a, caseSensitive).endsWith(text(b, caseSensitive));
    case "matches":
      return new RegExp(String(b ?? ""), caseSensitive ? "" : "i").test(typeof a === "string" ? a : JSON.stringify(a));
    case "greater_than":
      return Number(a) > Number(b);
    case "less_than":
      return Number(a) < Number(b);
    case "exists":
      return a !== undefined && a !== null && a !== "";
    case "not_exists":
      return a === undefined || a === null || a === "";
    case "is_true":
      return a === true || a === "true";
    case "is_false":
      return a === false || a === "false";
    default:
      throw new Error(`unknown condition ${JSON.stringify(condition)}`);
  }
}

export const props = {
  operand1: {
    type: "any",
    label: "Value",
    description: "The value to check, usually a reference to an earlier step: `{{steps.trigger.event.body.status}}`.",
  },
  condition: {
    type: "string",
    label: "Condition",
    options: CONDITIONS,
  },
  operand2: {
    type: "any",
    label: "Compared with",
    description: "The value the condition compares with (not used by exists, is true, is false).",
    optional: true,
  },
  caseSensitive: {
    type: "boolean",
    label: "Case sensitive",
    description: "Compare text with its case.",
    optional: true,
    default: false,
  },
};
