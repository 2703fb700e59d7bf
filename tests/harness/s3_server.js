// The S3 server of the tests (tests/harness/s3_server.h): s3rver on a free
// loopback port, plus the SigV4 check s3rver lacks (it looks up the access
// key but never verifies a v4 signature): each request's signature is
// computed again by the aws4 package from the headers the request says it
// signed, and a mismatch is answered 403 SignatureDoesNotMatch, as S3 does.
//
// Usage: node s3_server.js DATA_DIR BUCKET [PORT]
// (PORT 0 or none: a free one; a test that restarts the server passes the
// port it had, so the daemons' --s3_endpoint finds it again.)
// Prints "listening PORT" once it accepts requests, then one line per
// request: "METHOD URL STATUS".
'use strict';

const path = require('path');
const prefix = process.env.NEFFD_S3_TEST_PREFIX || '/opt/neffd-test';
const S3rver = require(path.join(prefix, 'node_modules/s3rver'));
const aws4 = require(path.join(prefix, 'node_modules/aws4'));

const [directory, bucket, port] = process.argv.slice(2);
// s3rver's one built-in account.
const SECRETS = { S3RVER: 'S3RVER' };

function signatureError(message) {
  return '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' +
    'SignatureDoesNotMatch</Code><Message>' + message + '</Message></Error>';
}

// Null when the request is signed correctly, else why not.
function checkSigV4(req) {
  const auth = req.headers.authorization || '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$/.exec(auth);
  if (!m) return 'no SigV4 Authorization header';
  const [, accessKeyId, , region, service, signedHeaders, signature] = m;
  const secretAccessKey = SECRETS[accessKeyId];
  if (secretAccessKey === undefined) return null;  // s3rver answers that one
  const headers = {};
  for (const name of signedHeaders.split(';')) {
    if (req.headers[name] === undefined) {
      return 'signed header ' + name + ' was not sent';
    }
    headers[name] = req.headers[name];
  }
  const signer = new aws4.RequestSigner({
    host: req.headers.host, path: req.url, method: req.method, service,
    region, headers, doNotModifyHeaders: true,
  }, { accessKeyId, secretAccessKey });
  // The request's own time (aws4 would take "now" with doNotModifyHeaders,
  // and fail every request that crossed a second boundary on its way).
  signer.datetime = req.headers['x-amz-date'];
  if (signer.signature() === signature) return null;
  // For whoever debugs a failing test: what we signed (stderr is kept).
  process.stderr.write(`SignatureDoesNotMatch for ${req.method} ${req.url}; ` +
    `our canonical request:\n${signer.canonicalString()}\n`);
  return 'The request signature we calculated does not match the ' +
    'signature you provided. Check your key and signing method.';
}

const server = new S3rver({
  address: '127.0.0.1', port: Number(port || 0), directory, silent: true,
  configureBuckets: [{ name: bucket, configs: [] }],
});
// Koa composes its middleware at listen time: this runs before s3rver's.
server.middleware.unshift(async (ctx, next) => {
  const problem = checkSigV4(ctx.req);
  if (problem !== null) {
    ctx.status = 403;
    ctx.type = 'application/xml';
    ctx.body = signatureError(problem);
    process.stdout.write(`${ctx.method} ${ctx.url} 403\n`);
    return;
  }
  try {
    await next();
    process.stdout.write(`${ctx.method} ${ctx.url} ${ctx.status}\n`);
  } catch (err) {
    // s3rver throws its S3 errors for koa to answer.
    process.stdout.write(`${ctx.method} ${ctx.url} ${err.status || 500}\n`);
    throw err;
  }
});
server.run().then(({ port }) => process.stdout.write(`listening ${port}\n`));
