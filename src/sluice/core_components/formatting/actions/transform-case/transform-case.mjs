// Sluice core component. Pipedream's `formatting-transform-case`.
const WORDS = /[A-Z]{2,}(?=[A-Z][a-z]+|\b|[^a-zA-Z])|[A-Z]?[a-z]+|[A-Z]+|\d+/g;
const words = (s) => s.match(WORDS) ?? [];
const cap = (w) => w.charAt(0).toUpperCase() + w.slice(1).toLowerCase();

const OPERATIONS = {
  lowercase: (s) => s.toLowerCase(),
  uppercase: (s) => s.toUpperCase(),
  title_case: (s) => s.replace(/\S+/g, cap),
  sentence_case: (s) => s.charAt(0).toUpperCase() + s.slice(1).toLowerCase(),
  camel_case: (s) => words(s).map((w, i) => (i ? cap(w) : w.toLowerCase())).join(""),
  pascal_case: (s) => words(s).map(cap).join(""),
  snake_case: (s) => words(s).map((w) => w.toLowerCase()).join("_"),
  kebab_case: (s) => words(s).map((w) => w.toLowerCase()).join("-"),
};

export default {
  key: "formatting-transform-case",
  name: "Transform Case",
  description: "Transform the case of a text: lower, upper, title, sentence, camel, pascal, snake or kebab case.",
  version: "0.1.0",
  type: "action",
  props: {
    input: { type: "string", label: "Input", description: "The text to transform." },
    operation: {
      type: "string",
      label: "Operation",
      description: "The case to transform the text to.",
      options: Object.keys(OPERATIONS).map((value) => ({ label: value.replace("_", " "), value })),
    },
  },
  async run({ $ }) {
    const op = OPERATIONS[this.operation];
    if (!op) throw new Error(`unknown operation ${JSON.stringify(this.operation)}: one of ${Object.keys(OPERATIONS).join(", ")}`);
    $.export("$summary", `Transformed the text to ${this.operation.replace("_", " ")}`);
    return op(String(this.input ?? ""));
  },
};
