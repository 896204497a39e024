// The way out of an npm install's jail (runtime/npm_jail.py).
//
//   node npm-egress.mjs <egress socket> <out fd> <command> [args...]
//
// The jail has no network but its own lo. This listens on a random port of 127.0.0.1,
// forwards every connection to the egress proxy's Unix socket (which lets CONNECT through to
// the npm registry only), then runs <command> with npm's proxy settings pointing here, and
// exits with its status. <out fd> (the pipe the install's result goes back to the server on)
// is handed to <command> as its descriptor 3, untouched: Node makes the pipes it wraps as
// process.stdout non-blocking, and tar then fails on a full pipe ("Wrote only 4096 of 10240").
import net from "node:net";
import { spawn } from "node:child_process";

const [socketPath, outFd, command, ...args] = process.argv.slice(2);

const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  client.pipe(upstream).pipe(client);
  client.on("error", () => upstream.destroy());
  upstream.on("error", () => client.destroy());
});

server.listen(0, "127.0.0.1", () => {
  const proxy = `http://127.0.0.1:${server.address().port}`;
  const child = spawn(command, args, {
    stdio: ["inherit", "inherit", "inherit", Number(outFd)],
    env: { ...process.env, npm_config_proxy: proxy, npm_config_https_proxy: proxy },
  });
  child.on("error", (err) => {
    process.stderr.write(`npm error could not run ${command}: ${err.message}\n`);
    process.exit(127);
  });
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
});
