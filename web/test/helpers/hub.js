// Helpers that run the real hub (bin/hub --demo) and demo servers (bin/demo)
// for the tests, and wait on what they log, with deadlines.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The repository's root. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** Where the binaries are: $SWITCHBOARD_BIN, else <root>/bin. */
export const BIN = process.env.SWITCHBOARD_BIN ?? path.join(ROOT, 'bin');

/**
 * binary returns the path of a built binary, or throws telling how to build
 * it.
 * @param {'hub'|'demo'} name
 */
export function binary(name) {
  const p = path.join(BIN, name);
  if (!existsSync(p)) {
    throw new Error(
      `${p} is missing: run \`make build\` in ${ROOT} first ` +
        '(the web tests need bin/hub and bin/demo; `go build -o bin/hub ./cmd/hub && go build -o bin/demo ./cmd/demo` builds both)',
    );
  }
  return p;
}

/**
 * withDeadline rejects with a message naming what was awaited when promise
 * has not settled within ms.
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
export function withDeadline(promise, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/**
 * nextEvent resolves with the detail of the next event of type on target
 * that satisfies pred, within ms.
 * @param {EventTarget} target
 * @param {string} type
 * @param {(detail: any) => boolean} [pred]
 * @param {number} [ms=10000]
 */
export function nextEvent(target, type, pred = () => true, ms = 10000) {
  let listener;
  const p = new Promise((resolve) => {
    listener = (ev) => {
      if (pred(ev.detail)) resolve(ev.detail);
    };
    target.addEventListener(type, listener);
  });
  return withDeadline(p, ms, `event "${type}"`).finally(() => target.removeEventListener(type, listener));
}

/**
 * Process wraps a child process whose stderr is logged line by line.
 */
class Process {
  constructor(cmd, args, label) {
    this.label = label;
    this.lines = [];
    this._waiters = [];
    this.proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve({ code, signal })));
    let buf = '';
    const onData = (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        this.lines.push(line);
        if (process.env.SWITCHBOARD_TEST_VERBOSE) process.stderr.write(`[${label}] ${line}\n`);
        for (const w of [...this._waiters]) {
          const m = line.match(w.re);
          if (m) {
            this._waiters.splice(this._waiters.indexOf(w), 1);
            w.resolve(m);
          }
        }
      }
    };
    this.proc.stdout.setEncoding('utf8').on('data', onData);
    this.proc.stderr.setEncoding('utf8').on('data', onData);
  }

  /**
   * waitLine resolves with the match of the next (or an earlier, if from is
   * given) line matching re, within ms; it fails early if the process exits.
   */
  waitLine(re, ms = 10000, from = this.lines.length) {
    for (const line of this.lines.slice(from)) {
      const m = line.match(re);
      if (m) return Promise.resolve(m);
    }
    const w = { re };
    const p = new Promise((resolve, reject) => {
      w.resolve = resolve;
      this.exited.then(({ code, signal }) =>
        reject(new Error(`${this.label} exited (code ${code}, signal ${signal}) before logging ${re}:\n${this.lines.slice(-20).join('\n')}`)),
      );
    });
    this._waiters.push(w);
    return withDeadline(p, ms, `${this.label} to log ${re}; its last lines:\n${this.lines.slice(-20).join('\n')}`).finally(() => {
      const i = this._waiters.indexOf(w);
      if (i >= 0) this._waiters.splice(i, 1);
    });
  }

  /** stop sends SIGTERM (or sig) and waits for the exit, SIGKILL after 15 s. */
  async stop(sig = 'SIGTERM') {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.exited;
    this.proc.kill(sig);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15000); // the hub drains for up to 10 s
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * startHub runs `bin/hub --demo --addr 127.0.0.1:PORT` (port 0: any free
 * port) and resolves once it listens.
 * @param {{port?: number, demo?: boolean, args?: string[]}} [opts]
 */
export async function startHub(opts = {}) {
  const { port = 0, demo = true, args = [] } = opts;
  const hubBin = binary('hub');
  const p = new Process(hubBin, [...(demo ? ['--demo'] : []), '--addr', `127.0.0.1:${port}`, ...args], 'hub');
  let m;
  try {
    m = await p.waitLine(/msg="switchboard listening" addr=(\S+)/, 15000);
  } catch (err) {
    await p.stop('SIGKILL');
    throw err;
  }
  const addr = m[1];
  const hub = {
    process: p,
    addr,
    port: Number(addr.split(':').pop()),
    httpURL: `http://${addr}/`,
    wsURL: `ws://${addr}/mcp`,
    serverURL: `ws://${addr}/mcp/server`,
    /** stop stops the hub. */
    stop: (sig) => p.stop(sig),
  };
  if (demo) await p.waitLine(/msg="server registered".* server=demo\b/, 15000, 0);
  return hub;
}

/**
 * startDemo runs `bin/demo --hub <hub>/mcp/server --name <name>` (with
 * --token when given) and resolves once the hub registered it.
 * @param {{serverURL: string, process: Process}} hub
 * @param {string} name
 * @param {{token?: string}} [opts]
 */
export async function startDemo(hub, name, opts = {}) {
  const from = hub.process.lines.length;
  const args = ['--hub', hub.serverURL, '--name', name, ...(opts.token ? ['--token', opts.token] : [])];
  const p = new Process(binary('demo'), args, `demo ${name}`);
  try {
    await hub.process.waitLine(new RegExp(`msg="server registered".* server=${name}\\b`), 15000, from);
  } catch (err) {
    await p.stop('SIGKILL');
    throw err;
  }
  return p;
}

/**
 * tokensFile writes a hub tokens file (JSON, which the hub reads as YAML)
 * to a fresh temporary directory and returns its path.
 * @param {{name: string, token: string, roles: string[]}[]} tokens
 */
export function tokensFile(tokens) {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'switchboard-tokens-')), 'tokens.json');
  writeFileSync(file, JSON.stringify({ tokens }), { mode: 0o600 });
  return file;
}

/**
 * startConnect runs `bin/hub connect --hub <hub> ARGS...` (a connector
 * putting a stdio server on the hub) and resolves once it started its
 * first child.
 * @param {{addr: string}} hub
 * @param {string[]} args the connector's flags, then -- and the command
 */
export async function startConnect(hub, args) {
  const p = new Process(binary('hub'), ['connect', '--hub', `ws://${hub.addr}`, ...args], 'connect');
  try {
    await p.waitLine(/msg="server started"/, 15000, 0);
  } catch (err) {
    await p.stop('SIGKILL');
    throw err;
  }
  return p;
}
