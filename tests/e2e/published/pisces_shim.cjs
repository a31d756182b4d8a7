// Stands in for pi's dist/cli.js: pi's RpcClient runs `node <cliPath> --mode rpc ...`; this runs the real
// `pisces` (PISCES_BIN, a JSON array) with the same arguments and stdio, and passes signals and the exit on.
"use strict";
const { spawn } = require("node:child_process");
const argv = JSON.parse(process.env.PISCES_BIN);
const child = spawn(argv[0], [...argv.slice(1), ...process.argv.slice(2)], { stdio: "inherit" });
for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.on(sig, () => child.kill(sig));
}
child.on("exit", (code, signal) => process.exit(code ?? (signal === "SIGTERM" ? 143 : 1)));
