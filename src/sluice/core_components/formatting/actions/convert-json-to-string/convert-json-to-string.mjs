// Sluice core component. Pipedream's `formatting-convert-json-to-string`.
export default {
  key: "formatting-convert-json-to-string",
  name: "Convert JSON to String",
  description: "Turn a value (an object, an array…) into its JSON text, compact or indented.",
  version: "0.1.0",
  type: "action",
  props: {
    input: { type: "any", label: "Input", description: "The value to convert, usually a reference to an earlier step's export." },
    indent: {
      type: "integer",
      label: "Indent",
      description: "Spaces of indentation (0: all on one line).",
      optional: true,
      default: 0,
      min: 0,
      max: 10,
    },
  },
  async run({ $ }) {
    const text = JSON.stringify(this.input, null, this.indent || undefined);
    $.export("$summary", "Converted the value to JSON text");
    return text;
  },
};
