// Sluice core component. Pipedream's `formatting-replace-text`.
export default {
  key: "formatting-replace-text",
  name: "Replace Text",
  description: "Replace every occurrence of a text (or a regular expression written /like this/g) in a text.",
  version: "0.1.0",
  type: "action",
  props: {
    input: { type: "string", label: "Input", description: "The text to search in." },
    findText: {
      type: "string",
      label: "Find",
      description: "The text to find, or a regular expression such as `/\\d+/g`.",
    },
    replaceText: {
      type: "string",
      label: "Replace with",
      description: "What to put in its place (empty: remove it).",
      optional: true,
    },
  },
  async run({ $ }) {
    const input = String(this.input ?? "");
    const find = String(this.findText ?? "");
    const regex = /^\/(.+)\/([a-z]*)$/s.exec(find);
    const pattern = regex ? new RegExp(regex[1], regex[2]) : find;
    const result = regex ? input.replace(pattern, this.replaceText ?? "") : input.split(find).join(this.replaceText ?? "");
    const count = regex ? (input.match(new RegExp(regex[1], regex[2].includes("g") ? regex[2] : regex[2] + "g")) ?? []).length : input.split(find).length - 1;
    $.export("$summary", `Replaced ${count} occurrence${count === 1 ? "" : "s"}`);
    return result;
  },
};
