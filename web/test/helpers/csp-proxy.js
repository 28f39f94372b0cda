// A reverse proxy in front of the hub that adds a Content-Security-Policy
// header to every response and passes WebSocket upgrades through, so that the
// dashboard is tested under exactly the policy it must work under.
//
// (Playwright's page.route could add the header too, but Chromium then treats
// the page as coming from an unknown address space, and its Local Network
// Access checks block the WebSocket to 127.0.0.1.)
import http from 'node:http';
import net from 'node:net';

/**
 * startCspProxy proxies 127.0.0.1:<random port> to target ("host:port"),
 * adding csp as a Content-Security-Policy header (on top of the hub's own:
 * the browser enforces both).
 * @param {string} target
 * @param {string} csp
 * @returns {Promise<{url: string, addr: string, close: () => Promise<void>}>}
 */
export async function startCspProxy(target, csp) {
  const i = target.lastIndexOf(':');
  const host = target.slice(0, i);
  const port = Number(target.slice(i + 1));
  const sockets = new Set();
  const track = (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };

  const server = http.createServer((req, res) => {
    const up = http.request({ host, port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
      const headers = { ...ur.headers };
      const own = headers['content-security-policy'];
      headers['content-security-policy'] = own ? [].concat(own, csp) : csp;
      res.writeHead(ur.statusCode ?? 502, headers);
      ur.pipe(res);
    });
    up.on('error', (err) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy: ${err.message}`);
    });
    req.pipe(up);
  });
  server.on('connection', track);
  server.on('upgrade', (req, socket, head) => {
    const up = net.connect(port, host, () => {
      let raw = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
      for (let j = 0; j < req.rawHeaders.length; j += 2) raw += `${req.rawHeaders[j]}: ${req.rawHeaders[j + 1]}\r\n`;
      up.write(`${raw}\r\n`);
      if (head?.length) up.write(head);
      socket.pipe(up).pipe(socket);
    });
    track(up);
    up.on('error', () => socket.destroy());
    socket.on('error', () => up.destroy());
    up.on('close', () => socket.destroy());
    socket.on('close', () => up.destroy());
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const addr = `127.0.0.1:${server.address().port}`;
  return {
    url: `http://${addr}/`,
    addr,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
