// everything-http.mjs — runs the reference server-everything in streamable
// HTTP mode for hutch's tests, bound to 127.0.0.1 on a free port (its own
// launcher listens on every interface, on PORT or 3001).  Prints
// "port N" on stdout once it listens; its own chatter is silenced.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, ...rest) {
  const cb = rest.find((a) => typeof a === "function");
  this.once("listening", () => process.stdout.write(`port ${this.address().port}\n`));
  return listen.call(this, { port: Number(port) || 0, host: "127.0.0.1" }, cb);
};
console.log = () => {};
process.env.PORT = "0";
await import("../node_modules/@modelcontextprotocol/server-everything/dist/transports/streamableHttp.js");
