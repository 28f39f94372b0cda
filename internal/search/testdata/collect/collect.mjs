// collect.mjs runs each published MCP server of servers.json over stdio,
// lists its tools (every page) and writes what it answered, unchanged, to
// ../corpus/<name>.json, with the server's package, version, licence and
// source; ../corpus/manifest.json lists them all.
//
//	cd internal/search/testdata/collect
//	GOBIN=$PWD/bin go install github.com/grafana/mcp-grafana/cmd/mcp-grafana@v1.6.3
//	GOBIN=$PWD/bin node collect.mjs [--install] [name...]
//	node collect.mjs --attribution   # only rewrite the attributions
//
// --install first installs each npm server, at the version servers.json
// pins, into servers/<name> of its own (their dependencies conflict when
// installed together), without install scripts (no browser downloads: no
// tool is called). "with" pins a dependency that a server's range lets
// float to a version it does not run with.
//
// Servers need no account to list their tools: servers.json gives those
// that insist on a key a dummy one, and nothing is called. A server whose
// licence is not one of ALLOWED is refused before it runs.
import { spawn, execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync, mkdtempSync, existsSync, readdirSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { join, dirname, resolve } from "node:path";

const ALLOWED = new Set(["MIT", "Apache-2.0", "ISC", "BSD-2-Clause", "BSD-3-Clause", "0BSD"]);
const here = dirname(new URL(import.meta.url).pathname);
const out = resolve(here, "../corpus");
const servers = JSON.parse(readFileSync(join(here, "servers.json"), "utf8"));
const install = process.argv.includes("--install");
const attributionOnly = process.argv.includes("--attribution");
const only = new Set(process.argv.slice(2).filter((a) => !a.startsWith("--")));
const scratch = mkdtempSync(join(tmpdir(), "corpus-"));

function pkgDir(s) {
  return join(here, "servers", s.name, "node_modules", s.package);
}

function pkgJSON(s) {
  return JSON.parse(readFileSync(join(pkgDir(s), "package.json"), "utf8"));
}

function installServer(s) {
  const prefix = join(here, "servers", s.name);
  mkdirSync(prefix, { recursive: true });
  execFileSync("npm", ["install", "--prefix", prefix, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error",
    `${s.package}@${s.version}`, ...(s.with ?? [])], { stdio: "inherit" });
}

// command returns how to start a server: its package's bin (the one named,
// or the only one), or a command of its own (a Go server built from the Go
// module proxy).
function command(s) {
  if (s.command) return [s.command.replace("$GOBIN", process.env.GOBIN ?? join(homedir(), "go", "bin")), s.args ?? []];
  const pj = pkgJSON(s);
  let bin = pj.bin;
  if (typeof bin === "object") bin = s.bin ? bin[s.bin] : Object.values(bin)[0];
  if (!bin) throw new Error(`${s.package} has no bin`);
  return [process.execPath, [join(pkgDir(s), bin), ...(s.args ?? [])]];
}

function listTools(s) {
  const [cmd, args] = command(s);
  const own = Object.fromEntries(Object.entries(s.env ?? {}).map(([k, v]) => [k, v.replaceAll("$SCRATCH", scratch)]));
  const env = { ...process.env, ...own, HOME: scratch, NO_UPDATE_NOTIFIER: "1", DO_NOT_TRACK: "1" };
  const child = spawn(cmd, args.map((a) => a.replaceAll("$SCRATCH", scratch)), {
    env, cwd: scratch, stdio: ["pipe", "pipe", "pipe"], detached: true,
  });
  let stderr = "";
  child.stderr.on("data", (d) => { stderr = (stderr + d).slice(-4000); });
  const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
  return new Promise((resolveP, rejectP) => {
    const tools = [];
    let serverInfo = null;
    const finish = (err) => {
      clearTimeout(timer);
      try { process.kill(-child.pid, "SIGKILL"); } catch {}
      if (err) rejectP(new Error(`${err}\n--- stderr:\n${stderr}`)); else resolveP({ serverInfo, tools });
    };
    const timer = setTimeout(() => finish("timed out"), (s.timeoutSeconds ?? 90) * 1000);
    child.on("exit", (code) => finish(`exited with ${code}`));
    let buf = "";
    child.stdout.on("data", (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        let m;
        try { m = JSON.parse(line); } catch { continue; } // a server's stray log line
        if (m.method && m.id !== undefined) { // a request of the server's: roots, ping
          send({ jsonrpc: "2.0", id: m.id, result: m.method === "roots/list" ? { roots: [] } : {} });
        } else if (m.id === 1) {
          if (m.error) return finish(`initialize: ${JSON.stringify(m.error)}`);
          serverInfo = m.result.serverInfo;
          send({ jsonrpc: "2.0", method: "notifications/initialized" });
          send({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} });
        } else if (typeof m.id === "number" && m.id >= 2) {
          if (m.error) return finish(`tools/list: ${JSON.stringify(m.error)}`);
          tools.push(...m.result.tools);
          if (m.result.nextCursor) {
            send({ jsonrpc: "2.0", id: m.id + 1, method: "tools/list", params: { cursor: m.result.nextCursor } });
          } else {
            finish();
          }
        }
      }
    });
    send({
      jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: { roots: {} }, clientInfo: { name: "switchboard-corpus", version: "1.0.0" } },
    });
  });
}

// allowed reports whether every licence of an SPDX expression is one of
// ALLOWED.
function allowed(expr) {
  const ids = String(expr ?? "").split(/\s+(?:AND|OR)\s+|[()]/).map((x) => x.trim()).filter(Boolean);
  return ids.length > 0 && ids.every((id) => ALLOWED.has(id));
}

function sourceOf(pj) {
  const r = pj.repository;
  const url = typeof r === "string" ? r : r?.url;
  return (url ?? pj.homepage ?? "").replace(/^git\+/, "").replace(/\.git$/, "");
}

// copyrightOf returns the copyright lines of a package's licence and
// notice files, which its licence asks us to keep with what we copy.
function copyrightOf(s) {
  const dir = s.package ? pkgDir(s) : moduleDir(s);
  if (!dir || !existsSync(dir)) return [];
  const lines = [];
  for (const f of readdirSync(dir).filter((f) => /^(licen[cs]e|notice|copying)/i.test(f)).sort()) {
    // A notice file's first copyright is the package's own; the rest are
    // of what it bundles, which the corpus does not copy.
    const notice = /^notice/i.test(f);
    for (const line of readFileSync(join(dir, f), "utf8").split("\n")) {
      const l = line.trim();
      if (/^copyright\s+(\(c\)|©|\d)/i.test(l) && !lines.includes(l)) {
        lines.push(l);
        if (notice) break;
      }
    }
  }
  return lines;
}

// moduleDir is where the Go module of a Go server was downloaded to.
function moduleDir(s) {
  try {
    const cache = execFileSync("go", ["env", "GOMODCACHE"], { encoding: "utf8" }).trim();
    return join(cache, `${s.module.replace(/[A-Z]/g, (c) => "!" + c.toLowerCase())}@${s.version}`);
  } catch {
    return null;
  }
}

// writeAttribution writes README.md beside the corpus: every server, its
// version, licence, source and copyright.
function writeAttribution(manifest) {
  const rows = manifest.servers.map((m) =>
    `| ${m.name} | \`${m.package}\` ${m.version} | ${m.license} | ${m.source} | ${(m.copyright ?? []).join("<br>") || "(none stated)"} | ${m.tools} |`);
  const notes = manifest.servers.filter((m) => m.licenseNote).map((m) => `- ${m.name}: ${m.licenseNote}.`);
  writeFileSync(join(out, "README.md"), `# Tool-search corpus

Each \`<server>.json\` is what one published MCP server answered to \`tools/list\` (every page), unchanged,
collected by \`../collect/collect.mjs\` from the version named below. The tools' names, descriptions and
schemas belong to their authors and are redistributed here under the licence of each (all permissive;
\`collect.mjs\` refuses any other), for the search-quality test of \`internal/search\`.
\`queries.yaml\` (questions and the tools that answer them) is this project's own.

| server | package | licence | source | copyright | tools |
|---|---|---|---|---|---|
${rows.join("\n")}

${notes.length ? "Licence notes:\n\n" + notes.join("\n") + "\n" : ""}`);
}

mkdirSync(out, { recursive: true });
const manifestPath = join(out, "manifest.json");
const manifest = existsSync(manifestPath) ? JSON.parse(readFileSync(manifestPath, "utf8")) : { servers: [] };
for (const s of servers) {
  const known = manifest.servers.find((m) => m.name === s.name);
  if (known) known.copyright = copyrightOf(s);
}
for (const s of attributionOnly ? [] : servers) {
  if (only.size && !only.has(s.name)) continue;
  if (install && s.package) {
    try { installServer(s); } catch (e) { console.error(`${s.name}: install failed: ${e.message}`); continue; }
  }
  if (s.package && !existsSync(pkgDir(s))) {
    console.error(`${s.name}: not installed (run with --install)`);
    continue;
  }
  const meta = s.package ? pkgJSON(s) : {};
  const entry = {
    name: s.name,
    package: s.package ?? s.module,
    version: meta.version ?? s.version,
    license: s.license ?? meta.license,
    source: s.source ?? sourceOf(meta),
    copyright: copyrightOf(s),
  };
  if (s.licenseNote) entry.licenseNote = s.licenseNote;
  if (!allowed(entry.license)) {
    console.error(`${s.name}: licence ${entry.license} is not one we may redistribute: skipped`);
    continue;
  }
  try {
    const { serverInfo, tools } = await listTools(s);
    writeFileSync(join(out, `${s.name}.json`), JSON.stringify({ ...entry, serverInfo, tools }, null, 1) + "\n");
    entry.tools = tools.length;
    manifest.servers = manifest.servers.filter((m) => m.name !== s.name).concat(entry);
    console.log(`${s.name}: ${tools.length} tools`);
  } catch (e) {
    console.error(`${s.name}: ${e.message}`);
  }
}
manifest.servers.sort((a, b) => a.name.localeCompare(b.name));
manifest.tools = manifest.servers.reduce((n, m) => n + m.tools, 0);
writeFileSync(manifestPath, JSON.stringify(manifest, null, 1) + "\n");
writeAttribution(manifest);
console.log(`${manifest.servers.length} servers, ${manifest.tools} tools`);
