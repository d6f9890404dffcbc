// generate.mjs writes src/schema.ts, the types of usersync's OpenAPI
// document (api/openapi.json) as openapi-typescript makes them, and
// src/schema.sha256, the SHA-256 of both files: a Go test
// (api/openapi_typescript_test.go) compares it with the document, so that
// a change of the document without its types fails without Node.
//
// With --check it writes nothing, and exits 1 when either file is not
// what it would write.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = dirname(dirname(fileURLToPath(import.meta.url)));
const root = dirname(dirname(pkg));
const doc = join(root, "api", "openapi.json");
const schema = join(pkg, "src", "schema.ts");
const sums = join(pkg, "src", "schema.sha256");
const check = process.argv.includes("--check");

const cli = join(dirname(createRequire(import.meta.url).resolve("openapi-typescript/package.json")), "bin", "cli.js");
const tmp = mkdtempSync(join(tmpdir(), "usersync-schema-"));
let types;
try {
  execFileSync(process.execPath, [cli, doc, "--empty-objects-unknown", "--output", join(tmp, "schema.ts")], { stdio: ["ignore", "ignore", "inherit"] });
  types = readFileSync(join(tmp, "schema.ts"), "utf8");
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
const sha256 = (b) => createHash("sha256").update(b).digest("hex");
const stamp = `${sha256(readFileSync(doc))}  api/openapi.json\n${sha256(types)}  clients/typescript/src/schema.ts\n`;

if (!check) {
  writeFileSync(schema, types);
  writeFileSync(sums, stamp);
  process.exit(0);
}
const stale = [
  [schema, types],
  [sums, stamp],
].filter(([file, want]) => !existsSync(file) || readFileSync(file, "utf8") !== want);
for (const [file] of stale) {
  console.error(`${file} is not what api/openapi.json makes: run npm run generate in clients/typescript, and commit it`);
}
process.exit(stale.length === 0 ? 0 : 1);
