// Sluice core component. Pipedream's `email` trigger: the source has its own address,
// `<source id>@<domain>` (SLUICE_EMAIL_DOMAIN), and every message sent to it is an event:
// the envelope, headers, addresses, text and HTML bodies and attachments (base64), parsed by
// Sluice's SMTP listener (SLUICE_SMTP_INBOUND_PORT; docs/components.md).
export default {
  key: "email-new-messages",
  name: "New Messages",
  description:
    "Get an e-mail address (`<source id>@<domain>`) and emit every message sent to it: subject, from, to, headers, text, HTML and attachments. Needs the inbound SMTP listener (`SLUICE_SMTP_INBOUND_PORT`).",
  version: "0.1.0",
  type: "source",
  props: {
    emitBodyOnly: {
      type: "boolean",
      label: "Body Only",
      description: "Emit the message's text body only, instead of the whole parsed message.",
      optional: true,
      default: false,
    },
  },
  async run(event) {
    const summary = `${event.from?.address || event.envelope?.mailFrom || "(no sender)"}: ${event.subject ?? "(no subject)"}`;
    this.$emit(this.emitBodyOnly ? { text: event.text, html: event.html } : event, {
      summary,
      ts: Date.now(),
    });
  },
};
