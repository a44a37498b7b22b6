// Node.js mysql (Debian node-mysql): the compatibility scenario.
//
// node-mysql binds "?" placeholders on the client (no server-side prepared
// statements), has changeUser and no automatic reconnect. Dates and big
// numbers are read as strings (dateStrings, bigNumberStrings): a JS Date
// has no microseconds and a Number cannot hold DECIMAL(30,10); so BIGINT
// results (COUNT, SUM, LAST_INSERT_ID()) are strings too.
// Run: VIGIL_COMPAT_PORT=... NODE_PATH=/usr/share/nodejs node compat/drivers/node-mysql.js
// Output: "PASS <check>", "FAIL <check>: <detail>", "SKIP <check>: <why>".
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const mysql = require('mysql');

if (!process.env.VIGIL_COMPAT_PORT) {
  console.error('set VIGIL_COMPAT_HOST, VIGIL_COMPAT_PORT, VIGIL_COMPAT_USER, VIGIL_COMPAT_PASSWORD and VIGIL_COMPAT_DB');
  process.exit(2);
}
const HOST = process.env.VIGIL_COMPAT_HOST || '127.0.0.1';
const PORT = Number(process.env.VIGIL_COMPAT_PORT);
const USER = process.env.VIGIL_COMPAT_USER || 'app';
const PASSWORD = process.env.VIGIL_COMPAT_PASSWORD || 'app';
const DB = process.env.VIGIL_COMPAT_DB || 'compat';
const USER2 = process.env.VIGIL_COMPAT_USER2 || '';
const PASSWORD2 = process.env.VIGIL_COMPAT_PASSWORD2 || '';

const TRICKY = 'O\'Reilly "quoted" back\\slash; -- not a comment';
const EMOJI = 'h\u00e9llo w\u00f6rld \u{1F600}\u{1F42C} \u{1D11E} \u4e2d\u6587';
const DECIMAL = '12345678901234567890.0123456789';
const DECIMAL2 = '24691357802469135780.0246913578';
const DATETIME6 = '2024-02-29 23:59:58.123456';

class CheckFailed extends Error {}

const oneLine = (s) => String(s).split(/\s+/).join(' ').trim();

// heal, when set, runs after a failed check: it replaces a connection that
// the failure left unusable, so one failure does not fail every later check.
let heal = null;

async function check(name, fn) {
  try {
    await fn();
    console.log(`PASS ${name}`);
    return;
  } catch (e) {
    if (e instanceof CheckFailed) {
      console.log(`FAIL ${name}: ${oneLine(e.message)}`);
    } else {
      console.log(`FAIL ${name}: ${e.code || e.name}: ${oneLine(e.message)}`);
      console.error(`${name}:`, e);
    }
  }
  if (heal) await heal();
}

const skip = (name, why) => console.log(`SKIP ${name}: ${why}`);

function show(v) {
  const s = JSON.stringify(v, (k, x) => (Buffer.isBuffer(x) ? `<${x.length} bytes>` : x));
  return s && s.length > 300 ? s.slice(0, 300) + '…' : s;
}

function expect(what, got, want) {
  if (show(got) !== show(want)) throw new CheckFailed(`${what}: got ${show(got)}, want ${show(want)}`);
}

function connect() {
  const c = mysql.createConnection({
    host: HOST, port: PORT, user: USER, password: PASSWORD, database: DB,
    charset: 'UTF8MB4_UNICODE_CI', connectTimeout: 10000, timezone: 'local',
    dateStrings: true, supportBigNumbers: true, bigNumberStrings: true,
  });
  c.on('error', () => {}); // a killed connection: reported by the next query
  return new Promise((resolve, reject) => c.connect((err) => (err ? reject(err) : resolve(c))));
}

// q runs a query; resolves to { rows, fields } (rows: arrays for a result
// set, an array of them for several, or the OK packet).
function q(c, sql, args) {
  return new Promise((resolve, reject) => {
    c.query({ sql, values: args, rowsAsArray: false, timeout: 30000 }, (err, rows, fields) => {
      if (err) reject(err);
      else resolve({ rows, fields });
    });
  });
}

// rows: the rows of a single result set as arrays of values.
async function rows(c, sql, args) {
  const { rows: r } = await q(c, sql, args);
  if (!Array.isArray(r)) return [];
  return r.map((row) => Object.values(row));
}

function end(c) {
  return new Promise((resolve) => c.end(() => resolve()));
}

(async () => {
  console.log(`# Node.js ${process.version} mysql ${require('mysql/package.json').version}`);
  let c;
  await check('connect', async () => {
    c = await connect();
    expect('DATABASE()', await rows(c, 'SELECT DATABASE()'), [[DB]]);
  });
  if (!c) return;
  heal = async () => {
    try {
      await q(c, 'SELECT 1');
    } catch (e) {
      console.log('# the connection is unusable after that failure: reconnecting');
      try {
        c = await connect();
      } catch (e2) {
        console.log(`# reconnecting failed: ${oneLine(e2.message)}`);
      }
    }
  };
  await check('setup', async () => {
    for (const s of [
      'DROP TABLE IF EXISTS vals, tx, dup, loaded',
      'CREATE TABLE vals (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL UNIQUE,'
        + ' i INT NULL, s VARCHAR(255) NULL, d DECIMAL(30,10) NULL, dt DATETIME(6) NULL, b LONGBLOB NULL)'
        + ' DEFAULT CHARSET=utf8mb4',
      'CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(32))',
      'CREATE TABLE dup (id INT PRIMARY KEY, v VARCHAR(32))',
      'CREATE TABLE loaded (id INT PRIMARY KEY, name VARCHAR(64)) DEFAULT CHARSET=utf8mb4',
      'DROP PROCEDURE IF EXISTS two_results',
      "CREATE PROCEDURE two_results(IN n INT) BEGIN SELECT n AS first; "
        + "SELECT CONCAT('second-', n) AS second, n * 2 AS twice; END",
    ]) await q(c, s);
  });

  await check('params.text', async () => {
    expect('SELECT ?, ?', await rows(c, 'SELECT ? AS a, ? AS b', [TRICKY, 42]), [[TRICKY, 42]]);
    await q(c, 'INSERT INTO vals (k, i, s) VALUES (?, ?, ?)', ['params', 42, TRICKY]);
    expect('row', await rows(c, 'SELECT i, s FROM vals WHERE k = ?', ['params']), [[42, TRICKY]]);
  });
  await check('nulls.text', async () => {
    await q(c, 'INSERT INTO vals (k, i, s, d, dt, b) VALUES (?, ?, ?, ?, ?, ?)', ['nulls', null, null, null, null, null]);
    expect('row', await rows(c, 'SELECT i, s, d, dt, b, ? IS NULL AS n FROM vals WHERE k = ?', [null, 'nulls']),
      [[null, null, null, null, null, 1]]);
  });
  await check('emoji.text', async () => {
    expect('SELECT ?', await rows(c, 'SELECT ? AS e', [EMOJI]), [[EMOJI]]);
    await q(c, 'INSERT INTO vals (k, s) VALUES (?, ?)', ['emoji', EMOJI]);
    expect('row', await rows(c, 'SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = ?', ['emoji']),
      [[EMOJI, [...EMOJI].length, Buffer.byteLength(EMOJI)]]);
  });
  await check('decimal.text', async () => {
    await q(c, 'INSERT INTO vals (k, d) VALUES (?, ?)', ['decimal', DECIMAL]);
    expect('row', await rows(c, 'SELECT d, d * 2 FROM vals WHERE k = ?', ['decimal']), [[DECIMAL, DECIMAL2]]);
  });
  await check('datetime6.text', async () => {
    await q(c, 'INSERT INTO vals (k, dt) VALUES (?, ?)', ['datetime6', DATETIME6]);
    expect('row', await rows(c, 'SELECT dt, MICROSECOND(dt) FROM vals WHERE k = ?', ['datetime6']), [[DATETIME6, 123456]]);
  });
  await check('blob.text', async () => {
    const data = crypto.randomBytes(1 << 20);
    const sha = crypto.createHash('sha256').update(data).digest('hex');
    await q(c, 'INSERT INTO vals (k, b) VALUES (?, ?)', ['blob', data]);
    const r = (await rows(c, 'SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = ?', ['blob']))[0];
    expect('LENGTH, SHA2 on the server', [r[0], r[1]], [1 << 20, sha]);
    expect(`sha256 of the value read back (length ${r[2].length})`, crypto.createHash('sha256').update(r[2]).digest('hex'), sha);
  });
  const tx = (fn) => new Promise((resolve, reject) => c.beginTransaction((err) => (err ? reject(err) : resolve()))).then(fn);
  await check('txn.commit', async () => {
    await tx(async () => {
      await q(c, "INSERT INTO tx VALUES (1, 'committed')");
      expect('inside the transaction', await rows(c, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
      await new Promise((resolve, reject) => c.commit((err) => (err ? reject(err) : resolve())));
    });
    expect('after COMMIT', await rows(c, 'SELECT v FROM tx WHERE id = 1'), [['committed']]);
  });
  await check('txn.rollback', async () => {
    await tx(async () => {
      await q(c, "INSERT INTO tx VALUES (2, 'rolled back')");
      expect('inside the transaction', await rows(c, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [['1']]);
      await new Promise((resolve, reject) => c.rollback((err) => (err ? reject(err) : resolve())));
    });
    expect('after ROLLBACK', await rows(c, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [['0']]);
  });
  await check('load_data_local.text', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'compat-')), 'load.csv');
    let text = '';
    for (let i = 1; i <= 1000; i++) text += `${i},name-${i}${i === 1000 ? ' \u{1F42C}' : ''}\n`;
    fs.writeFileSync(file, text);
    try {
      await q(c, 'DELETE FROM loaded');
      const { rows: ok } = await q(c, "LOAD DATA LOCAL INFILE ? INTO TABLE loaded CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' (id, name)", [file]);
      expect('affected rows', ok.affectedRows, 1000);
      expect('COUNT, SUM, MAX(name), the emoji row',
        await rows(c, 'SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded'),
        [['1000', '500500', 'name-999', 'name-1000 \u{1F42C}']]);
    } finally {
      fs.rmSync(path.dirname(file), { recursive: true });
    }
  });
  await check('call_multi_result.text', async () => {
    const { rows: sets } = await q(c, 'CALL two_results(?)', [7]);
    const got = sets.filter(Array.isArray).map((s) => s.map((row) => Object.values(row)));
    expect('result sets', got, [[[7]], [['second-7', '14']]]);
    expect('SELECT after the CALL', await rows(c, "SELECT 'still working'"), [['still working']]);
  });
  await check('dup_key.text', async () => {
    await q(c, "INSERT INTO dup VALUES (1, 'first')");
    let err;
    try {
      await q(c, "INSERT INTO dup VALUES (1, 'second')");
    } catch (e) {
      err = e;
    }
    if (!err) throw new CheckFailed('the duplicate INSERT succeeded');
    expect('errno, sqlState', [err.errno, err.sqlState], [1062, '23000']);
    expect('SELECT after the error', await rows(c, 'SELECT v FROM dup WHERE id = 1'), [['first']]);
  });
  await check('ok_info.text', async () => {
    // OK packets with an info string (multi-row INSERT, UPDATE), then the
    // session goes on. node-mysql parses changedRows out of the info.
    await q(c, 'DELETE FROM dup WHERE id >= 100');
    const { rows: ins } = await q(c, "INSERT INTO dup VALUES (100, 'x'), (101, 'y')");
    expect('affectedRows of INSERT', ins.affectedRows, 2);
    const { rows: up } = await q(c, "UPDATE dup SET v = 'z' WHERE id >= 100");
    expect('affectedRows, changedRows of UPDATE', [up.affectedRows, up.changedRows], [2, 2]);
    expect('SELECT after', await rows(c, "SELECT COUNT(*) FROM dup WHERE v = 'z'"), [['2']]);
  });
  await check('last_insert_id.text', async () => {
    const { rows: ok } = await q(c, 'INSERT INTO vals (k) VALUES (?)', ['lid']);
    const id = ok.insertId;
    if (!id) throw new CheckFailed('no insert id in the OK packet');
    expect('SELECT LAST_INSERT_ID()', await rows(c, 'SELECT LAST_INSERT_ID()'), [[String(id)]]);
    expect("the row's id", await rows(c, "SELECT id FROM vals WHERE k = 'lid'"), [[id]]);
  });
  await check('use_schema.text', async () => {
    try {
      await q(c, `USE \`${DB}_a\``);
      expect('USE a; SELECT', await rows(c, 'SELECT v FROM t'), [['from-a']]);
      await q(c, `USE \`${DB}_b\``);
      expect('USE b; SELECT', await rows(c, 'SELECT v FROM t'), [['from-b']]);
    } finally {
      await q(c, `USE \`${DB}\``);
    }
  });
  await check('read_your_writes.text', async () => {
    // DDL, then a read at once; a big write, then a read at once.
    await q(c, 'DROP TABLE IF EXISTS ryw');
    await q(c, 'CREATE TABLE ryw (id INT PRIMARY KEY, n INT)');
    expect('SELECT right after CREATE TABLE', await rows(c, 'SELECT COUNT(*) FROM ryw'), [['0']]);
    await q(c, 'INSERT INTO ryw SELECT seq, seq FROM seq_1_to_10000');
    expect('SELECT right after INSERT ... SELECT', await rows(c, 'SELECT COUNT(*), SUM(n) FROM ryw'), [['10000', '50005000']]);
  });
  await check('warnings.select', async () => {
    const { rows: r } = await q(c, "SELECT CAST('12abc' AS SIGNED) AS n");
    expect('SELECT CAST', r.map((x) => x.n), [12]);
    const w = await rows(c, 'SHOW WARNINGS');
    if (w.length !== 1 || w[0][1] !== 1292 || !w[0][2].includes('12abc')) {
      throw new CheckFailed(`SHOW WARNINGS after SELECT CAST('12abc' AS SIGNED): ${show(w)}`);
    }
  });
  await check('warnings.dml', async () => {
    const { rows: ok } = await q(c, "INSERT IGNORE INTO dup VALUES (1, 'ignored')");
    expect('warningCount', ok.warningCount, 1);
    const w = await rows(c, 'SHOW WARNINGS');
    if (w.length !== 1 || w[0][1] !== 1062) throw new CheckFailed(`SHOW WARNINGS after INSERT IGNORE of a duplicate: ${show(w)}`);
  });
  await check('warnings.fresh', async () => {
    for (let i = 0; i < 4; i++) await q(c, "SELECT CAST('x' AS SIGNED)");
    const f = await connect();
    try {
      expect('first SHOW WARNINGS of a new connection', await rows(f, 'SHOW WARNINGS'), []);
    } finally {
      await end(f);
    }
  });
  await check('connection_id', async () => {
    expect("SELECT CONNECTION_ID() vs the handshake's thread id", await rows(c, 'SELECT CONNECTION_ID()'), [[c.threadId]]);
  });
  await check('reconnect', async () => {
    await q(c, "SET @compat_marker = 'old session'");
    const old = c.threadId;
    await end(c);
    c = await connect();
    expect('user variable and schema after reconnecting', await rows(c, 'SELECT @compat_marker, DATABASE()'), [[null, DB]]);
    if (c.threadId === old) throw new CheckFailed(`same thread id ${old} after reconnecting`);
  });
  skip('driver_reconnect', 'node-mysql has no automatic reconnect');
  if (!USER2) {
    skip('change_user', 'VIGIL_COMPAT_USER2 is not set');
  } else {
    await check('change_user', async () => {
      const change = (user, password) => new Promise((resolve, reject) =>
        c.changeUser({ user, password, database: DB }, (err) => (err ? reject(err) : resolve())));
      await q(c, "SET @compat_marker = 'before change_user'");
      await change(USER2, PASSWORD2);
      expect(`after changeUser to ${USER2}`, await rows(c, 'SELECT CURRENT_USER(), DATABASE(), @compat_marker'),
        [[`${USER2}@%`, DB, null]]);
      await change(USER, PASSWORD);
      expect('after changeUser back', await rows(c, 'SELECT CURRENT_USER()'), [[`${USER}@%`]]);
    });
  }
  await end(c);
})().catch((e) => {
  console.log(`FAIL scenario: ${oneLine(e.stack || e)}`);
  process.exit(1);
});
