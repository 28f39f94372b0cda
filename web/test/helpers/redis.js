// A redis-server for the tests that run two hubs as one cluster: on a free
// loopback port, without persistence, stopped by the test.
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { withDeadline } from './hub.js';

/** freePort asks the kernel for a loopback port nobody uses. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * startRedis runs redis-server and resolves once it accepts connections,
 * with its URL and stop(). It fails with a clear message when redis-server
 * is not installed.
 * @returns {Promise<{url: string, stop: () => Promise<void>}>}
 */
export async function startRedis() {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new Error('redis-server is missing: install it (apt-get install -y redis-server, or `make deps`); the two-instance tests need it');
  }
  const port = await freePort();
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  let out = '';
  const ready = new Promise((resolve, reject) => {
    const onData = (chunk) => {
      out += chunk;
      if (out.includes('Ready to accept connections')) resolve();
    };
    proc.stdout.setEncoding('utf8').on('data', onData);
    proc.stderr.setEncoding('utf8').on('data', onData);
    exited.then((code) => reject(new Error(`redis-server exited (${code}) before it was ready:\n${out.slice(-2000)}`)));
  });
  try {
    await withDeadline(ready, 15000, `redis-server on port ${port}; its output:\n${out}`);
  } catch (err) {
    proc.kill('SIGKILL');
    throw err;
  }
  return {
    url: `redis://127.0.0.1:${port}/0`,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}
