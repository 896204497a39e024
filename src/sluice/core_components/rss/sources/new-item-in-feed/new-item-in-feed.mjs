// Sluice core component. Pipedream's `rss-new-item-in-feed`: polls an RSS 2.0, RSS 1.0 or
// Atom feed and emits each item not seen before (dedupe "unique" on the item's guid, else
// its link, else its title). No npm package: the feed is read with a small parser of its
// own, which takes the fields feeds have in common.
const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

function decode(text) {
  return text
    .replace(/<!\[CDATA\[([\s\S]*?)\]\]>/g, (_, inner) => inner.replace(/&/g, "\u0000amp;"))
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, ref) => {
      if (ref[0] === "#") {
        const code = ref[1].toLowerCase() === "x" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
        return Number.isFinite(code) ? String.fromCodePoint(code) : whole;
      }
      return ENTITIES[ref.toLowerCase()] ?? whole;
    })
    .replace(/\u0000amp;/g, "&")
    .trim();
}

function tags(xml, name) {
  const re = new RegExp(`<${name}(\\s[^>]*)?(?:/>|>([\\s\\S]*?)</${name}>)`, "gi");
  const found = [];
  for (const m of xml.matchAll(re)) found.push({ attrs: m[1] || "", text: m[2] ?? "" });
  return found;
}

function attr(attrs, name) {
  const m = new RegExp(`\\s${name}\\s*=\\s*("([^"]*)"|'([^']*)')`, "i").exec(attrs);
  return m ? decode(m[2] ?? m[3] ?? "") : undefined;
}

function first(xml, ...names) {
  for (const name of names) {
    const [hit] = tags(xml, name);
    if (hit && hit.text.trim()) return decode(hit.text);
  }
  return undefined;
}

function date(text) {
  if (!text) return null;
  const parsed = new Date(text);
  return Number.isNaN(parsed.getTime()) ? null : parsed.toISOString();
}

function author(xml) {
  const [hit] = tags(xml, "author");
  if (hit && /<name[\s>]/i.test(hit.text)) return first(hit.text, "name") ?? null;
  return first(xml, "author", "dc:creator") ?? null;
}

export function parseFeed(xml) {
  const atom = /<feed[\s>]/i.test(xml) && !/<rss[\s>]/i.test(xml);
  const blocks = tags(xml, atom ? "entry" : "item");
  return blocks.map(({ text }) => {
    let link = first(text, "link");
    if (atom || !link) {
      const links = tags(text, "link");
      const alternate = links.find((l) => (attr(l.attrs, "rel") ?? "alternate") === "alternate");
      link = attr((alternate ?? links[0] ?? { attrs: "" }).attrs, "href") ?? link;
    }
    const published = first(text, "pubDate", "published", "dc:date", "updated");
    const description = first(text, "description", "summary", "content:encoded", "content");
    return {
      title: first(text, "title") ?? null,
      description: description ?? null,
      summary: first(text, "summary", "description") ?? null,
      link: link ?? null,
      guid: first(text, "guid", "id") ?? null,
      author: author(text),
      categories: tags(text, "category").map((c) => decode(c.text) || attr(c.attrs, "term")).filter(Boolean),
      pubdate: date(published),
      date: date(first(text, "updated", "pubDate", "published", "dc:date")),
      enclosures: tags(text, "enclosure").map((e) => ({
        url: attr(e.attrs, "url") ?? null,
        type: attr(e.attrs, "type") ?? null,
        length: attr(e.attrs, "length") ?? null,
      })),
    };
  });
}

export default {
  key: "rss-new-item-in-feed",
  name: "New Item in Feed",
  description: "Emit new items from an RSS or Atom feed.",
  version: "0.1.0",
  type: "source",
  dedupe: "unique",
  props: {
    url: {
      type: "string",
      label: "Feed URL",
      description: "The URL of a public RSS or Atom feed.",
    },
    timer: {
      type: "$.interface.timer",
      label: "Polling schedule",
      description: "How often to read the feed.",
      default: { intervalSeconds: 900 },
    },
  },
  hooks: {
    async activate() {
      // Read the feed once, so a wrong URL or a page that is not a feed fails the deploy.
      await this.fetchItems();
    },
  },
  methods: {
    async fetchItems() {
      const res = await fetch(this.url, {
        headers: { accept: "application/rss+xml, application/atom+xml, application/xml, text/xml;q=0.9, */*;q=0.5" },
      });
      if (!res.ok) throw new Error(`the feed answered HTTP ${res.status}: ${this.url}`);
      const xml = await res.text();
      if (!/<(rss|feed|rdf:RDF)[\s>]/i.test(xml)) throw new Error(`not an RSS or Atom feed: ${this.url}`);
      return parseFeed(xml);
    },
  },
  async run() {
    const items = await this.fetchItems();
    // Oldest first, so the events list in the feed's order of publication.
    for (const item of items.reverse()) {
      const id = item.guid || item.link || item.title;
      if (!id) continue;
      this.$emit(item, {
        id,
        summary: item.title || item.link || id,
        ts: item.pubdate ? Date.parse(item.pubdate) : undefined,
      });
    }
  },
};
