// Sluice core component. Pipedream's `data_stores-add-update-record`: a text value that holds
// JSON is stored as the value it holds, as Pipedream's does.
export default {
  key: "data_stores-add-update-record",
  name: "Add Update Record",
  description: "Add or update one record in a data store.",
  version: "0.1.0",
  type: "action",
  props: {
    dataStore: {
      type: "data_store",
      label: "Data Store",
      description: "The data store's name or id (`ds_…`).",
    },
    key: { type: "string", label: "Key", description: "The key of the record to add or update." },
    value: { type: "any", label: "Value", description: "A text, an object or an array." },
  },
  async run({ $ }) {
    let value = this.value;
    if (typeof value === "string") {
      try {
        value = JSON.parse(value);
      } catch {
        // plain text: stored as it is
      }
    }
    const existed = (await this.dataStore.get(this.key)) !== undefined;
    await this.dataStore.set(this.key, value);
    $.export("$summary", `${existed ? "Updated the record for" : "Added a new record with"} the key \`${this.key}\``);
    return { key: this.key, value };
  },
};
