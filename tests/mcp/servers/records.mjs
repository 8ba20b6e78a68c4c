// records.mjs — an upstream for hutch's return-type tests (stdio, NDJSON,
// no dependencies).  Its tools declare no outputSchema and answer JSON
// text, so hutch can only learn their result shapes by watching calls:
//   lookup {id}: {"id", "name", "tags": [..], "score", "note" (even ids only)}
//                with values that must never show up in a signature;
//   hidden {}:   {"secret_field": ...}, for a policy that denies it;
//   mirror {value}: value itself, so a program chooses a result's keys
//                (text made to read as an instruction, for one).
import { createInterface } from "node:readline";

const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const text = (v) => ({ content: [{ type: "text", text: JSON.stringify(v) }] });

createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.method === "initialize") {
    send({
      id: m.id,
      result: {
        protocolVersion: m.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "records", version: "1.0.0" },
      },
    });
  } else if (m.method === "tools/list") {
    send({
      id: m.id,
      result: {
        tools: [
          {
            name: "lookup",
            description: "Look a record up by id.",
            inputSchema: { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
          },
          { name: "hidden", description: "Internal records.", inputSchema: { type: "object" } },
          {
            name: "mirror",
            description: "Answer with the value given.",
            inputSchema: { type: "object", properties: { value: {} }, required: ["value"] },
          },
        ],
      },
    });
  } else if (m.method === "tools/call") {
    const args = m.params?.arguments ?? {};
    if (m.params?.name === "lookup") {
      const id = Number(args.id);
      const rec = { id, name: `SECRET-NAME-${id}`, tags: [`TAG-VALUE-${id}`], score: id + 0.5 };
      if (id % 2 === 0) rec.note = `NOTE-VALUE-${id}`;
      send({ id: m.id, result: text(rec) });
    } else if (m.params?.name === "mirror") {
      send({ id: m.id, result: text(args.value) });
    } else if (m.params?.name === "hidden") {
      send({ id: m.id, result: text({ secret_field: "HIDDEN-VALUE" }) });
    } else {
      send({ id: m.id, error: { code: -32602, message: "unknown tool" } });
    }
  } else if (m.id !== undefined && m.method) {
    send({ id: m.id, result: {} });
  }
});
