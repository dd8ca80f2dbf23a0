// The pod-identity init container of a broker pod (walproxy chart). Writes identity.env for the
// start scripts:
//   BROKER_RACK    the value of RACK_NODE_LABEL on the node this pod runs on (KIP-392 broker.rack).
//                  The downward API cannot read node labels, so this asks the API server
//                  (GET /api/v1/nodes/<NODE_NAME>; the chart's ClusterRole allows `get nodes`).
//   WAL_STORE_URL  the WAL store of that zone: WAL_STORE_URL_BY_ZONE (JSON zone → URL), else
//                  WAL_STORE_URL. S3 Express One Zone directory buckets are zonal.
// Environment: NODE_NAME, RACK_NODE_LABEL (empty: no rack), WAL_STORE_URL, WAL_STORE_URL_BY_ZONE,
// WALPROXY_POD_DIR (default /var/run/walproxy), WALPROXY_KUBE_API (default: the in-cluster
// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT), WALPROXY_SERVICE_ACCOUNT_DIR
// (token and ca.crt; default /var/run/secrets/kubernetes.io/serviceaccount).
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';

const env = process.env;
const podDir = env.WALPROXY_POD_DIR || '/var/run/walproxy';
const saDir = env.WALPROXY_SERVICE_ACCOUNT_DIR || '/var/run/secrets/kubernetes.io/serviceaccount';

function fail(message) {
  process.stderr.write(`pod-identity: ${message}\n`);
  process.exit(1);
}

function apiBase() {
  if (env.WALPROXY_KUBE_API) return env.WALPROXY_KUBE_API.replace(/\/$/, '');
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) fail('KUBERNETES_SERVICE_HOST is not set (not in a pod?) and WALPROXY_KUBE_API neither');
  return `https://${host.includes(':') ? `[${host}]` : host}:${env.KUBERNETES_SERVICE_PORT || '443'}`;
}

function getJson(url) {
  const token = readFileSync(`${saDir}/token`, 'utf8').trim();
  const secure = url.startsWith('https:');
  const options = {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    timeout: 10_000,
  };
  if (secure) options.ca = readFileSync(`${saDir}/ca.crt`);
  return new Promise((resolve, reject) => {
    const request = (secure ? https : http).get(url, options, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => {
        body += chunk;
      });
      response.on('end', () => {
        if (response.statusCode === 200) resolve(JSON.parse(body));
        else reject(new Error(`HTTP ${response.statusCode} from ${url}: ${body.slice(0, 300)}`));
      });
    });
    request.on('timeout', () => request.destroy(new Error(`timeout after 10 s: ${url}`)));
    request.on('error', reject);
  });
}

async function nodeLabel(label) {
  const nodeName = env.NODE_NAME;
  if (!nodeName) fail('NODE_NAME is not set (downward API spec.nodeName)');
  const url = `${apiBase()}/api/v1/nodes/${encodeURIComponent(nodeName)}`;
  let lastError;
  for (let attempt = 1; attempt <= 10; attempt++) {
    try {
      const node = await getJson(url);
      const value = node?.metadata?.labels?.[label];
      if (!value) fail(`node ${nodeName} has no label ${label} (brokers.rack.nodeLabel)`);
      return value;
    } catch (error) {
      lastError = error;
      // 401/403 will not heal by waiting much, but a fresh API server or token may: retry a while.
      await new Promise((resolve) => setTimeout(resolve, Math.min(500 * 2 ** attempt, 5_000)));
    }
  }
  fail(`cannot read node ${nodeName}: ${lastError.message}`);
}

function shellQuote(value) {
  return `'${String(value).replaceAll("'", `'\\''`)}'`;
}

const label = env.RACK_NODE_LABEL || '';
const rack = label ? await nodeLabel(label) : '';
let byZone = {};
try {
  byZone = JSON.parse(env.WAL_STORE_URL_BY_ZONE || '{}');
} catch (error) {
  fail(`WAL_STORE_URL_BY_ZONE is not JSON: ${error.message}`);
}
let storeUrl = env.WAL_STORE_URL || '';
if (rack && typeof byZone[rack] === 'string' && byZone[rack] !== '') storeUrl = byZone[rack];
else if (Object.keys(byZone).length > 0 && !storeUrl) {
  fail(`no WAL store for zone ${rack}: add it to walproxy.wal.storeUrlByZone or set walproxy.wal.storeUrl`);
}

const file = `${podDir}/identity.env`;
writeFileSync(`${file}.tmp`, `BROKER_RACK=${shellQuote(rack)}\nWAL_STORE_URL=${shellQuote(storeUrl)}\n`);
renameSync(`${file}.tmp`, file);
process.stdout.write(`pod-identity: rack '${rack}', WAL store '${storeUrl}'\n`);
