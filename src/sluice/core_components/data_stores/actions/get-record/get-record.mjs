// Sluice core component. Pipedream's `data_stores-get-record`: one record of an account's
// data store (docs/api.md, "Data stores"), `undefined` when the key has none.
export default {
  key: "data_stores-get-record",
  name: "Get Record",
  description: "Get the value of one key in a data store; optionally add it when it is missing.",
  version: "0.1.0",
  type: "action",
  props: {
    dataStore: {
      type: "data_store",
      label: "Data Store",
      description: "The data store's name or id (`ds_…`).",
    },
    key: { type: "string", label: "Key", description: "The key of the record to get." },
    addRecordIfNotFound: {
      type: "boolean",
      label: "Create a new record if the key is not found?",
      optional: true,
      default: false,
    },
    value: {
      type: "any",
      label: "Value",
      description: "The value to add when the key is not found (with the option above).",
      optional: true,
    },
  },
  async run({ $ }) {
    const record = await this.dataStore.get(this.key);
    if (record !== undefined) {
      $.export("$summary", `Found data for the key \`${this.key}\``);
      return record;
    }
    if (this.addRecordIfNotFound) {
      await this.dataStore.set(this.key, this.value ?? null);
      $.export("$summary", `Added a new record with the key \`${this.key}\``);
      return this.dataStore.get(this.key);
    }
    $.export("$summary", `No data found for the key \`${this.key}\``);
    return undefined;
  },
};
