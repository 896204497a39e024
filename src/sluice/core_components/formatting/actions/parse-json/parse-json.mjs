// Sluice core component. Pipedream's `formatting-parse-json`.
export default {
  key: "formatting-parse-json",
  name: "Parse JSON",
  description: "Parse a JSON text into the value it holds (an object, an array, a number…).",
  version: "0.1.0",
  type: "action",
  props: {
    input: { type: "string", label: "Input", description: "The JSON text to parse." },
  },
  async run({ $ }) {
    if (typeof this.input !== "string") return this.input; // already a value
    let value;
    try {
      value = JSON.parse(this.input);
    } catch (err) {
      const error = new Error(`the input is not valid JSON: ${err.message}`);
      error.name = "ConfigurationError";
      throw error;
    }
    $.export("$summary", "Parsed the JSON text");
    return value;
  },
};
