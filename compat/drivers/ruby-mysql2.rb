# Ruby mysql2 (Debian ruby-mysql2, on libmariadb): the compatibility
# scenario.
#
# ".text" checks build statements with Client#escape (mysql2 has no
# client-side placeholders); ".ps" checks use Client#prepare (server-side
# prepared statements). reconnect: true is libmariadb's automatic
# reconnect; mysql2 has no change_user.
# Run: VIGIL_COMPAT_PORT=... ruby compat/drivers/ruby-mysql2.rb
# Output: "PASS <check>", "FAIL <check>: <detail>", "SKIP <check>: <why>".
require 'mysql2'
require 'bigdecimal'
require 'digest'
require 'securerandom'
require 'tempfile'

$stdout.sync = true
abort 'set VIGIL_COMPAT_HOST, VIGIL_COMPAT_PORT, VIGIL_COMPAT_USER, VIGIL_COMPAT_PASSWORD and VIGIL_COMPAT_DB' unless ENV['VIGIL_COMPAT_PORT']
HOST = ENV.fetch('VIGIL_COMPAT_HOST', '127.0.0.1')
PORT = Integer(ENV['VIGIL_COMPAT_PORT'])
USER = ENV.fetch('VIGIL_COMPAT_USER', 'app')
PASSWORD = ENV.fetch('VIGIL_COMPAT_PASSWORD', 'app')
DB = ENV.fetch('VIGIL_COMPAT_DB', 'compat')

TRICKY = %q{O'Reilly "quoted" back\slash; -- not a comment}
EMOJI = "h\u00e9llo w\u00f6rld \u{1F600}\u{1F42C} \u{1D11E} \u4e2d\u6587"
DECIMAL = '12345678901234567890.0123456789'
DECIMAL2 = '24691357802469135780.0246913578'
DATETIME6 = '2024-02-29 23:59:58.123456'

class CheckFailed < StandardError; end

def one_line(s) = s.to_s.split.join(' ')

def check(name)
  yield
  puts "PASS #{name}"
rescue CheckFailed => e
  puts "FAIL #{name}: #{one_line(e.message)}"
  $heal&.call
rescue StandardError => e
  puts "FAIL #{name}: #{e.class}: #{one_line(e.message)}"
  warn "#{name}: #{e.full_message}"
  $heal&.call
end

def skip(name, why) = puts("SKIP #{name}: #{why}")

def show(v)
  s = v.inspect
  s.length > 300 ? s[0, 300] + '…' : s
end

def expect(what, got, want)
  raise CheckFailed, "#{what}: got #{show(got)}, want #{show(want)}" unless got == want
end

def connect(reconnect: false)
  Mysql2::Client.new(host: HOST, port: PORT, username: USER, password: PASSWORD, database: DB,
                     encoding: 'utf8mb4', local_infile: true, reconnect: reconnect,
                     connect_timeout: 10, read_timeout: 30, write_timeout: 30)
end

# rows: a text query's rows as arrays (or [] without a result set).
def rows(c, sql)
  r = c.query(sql, as: :array)
  r ? r.to_a : []
end

# prows: prepare, execute with args, close; rows as arrays.
def prows(c, sql, *args)
  st = c.prepare(sql)
  r = st.execute(*args, as: :array)
  out = r ? r.to_a : []
  st.close
  out
end

puts "# Ruby #{RUBY_VERSION} mysql2 #{Mysql2::VERSION} (#{Mysql2::Client.info[:version]})"

c = nil
check('connect') do
  c = connect
  expect('DATABASE()', rows(c, 'SELECT DATABASE()'), [[DB]])
end
exit 0 unless c

# $heal runs after a failed check: it replaces a connection that the
# failure left unusable, so one failure does not fail every later check.
$heal = lambda do
  c.query('SELECT 1')
rescue StandardError
  puts '# the connection is unusable after that failure: reconnecting'
  begin
    c = connect
  rescue StandardError => e
    puts "# reconnecting failed: #{one_line(e.message)}"
  end
end

check('setup') do
  ['DROP TABLE IF EXISTS vals, tx, dup, loaded',
   'CREATE TABLE vals (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL UNIQUE,' \
   ' i INT NULL, s VARCHAR(255) NULL, d DECIMAL(30,10) NULL, dt DATETIME(6) NULL, b LONGBLOB NULL)' \
   ' DEFAULT CHARSET=utf8mb4',
   'CREATE TABLE tx (id INT PRIMARY KEY, v VARCHAR(32))',
   'CREATE TABLE dup (id INT PRIMARY KEY, v VARCHAR(32))',
   'CREATE TABLE loaded (id INT PRIMARY KEY, name VARCHAR(64)) DEFAULT CHARSET=utf8mb4',
   'DROP PROCEDURE IF EXISTS two_results',
   "CREATE PROCEDURE two_results(IN n INT) BEGIN SELECT n AS first; " \
   "SELECT CONCAT('second-', n) AS second, n * 2 AS twice; END"].each { |s| c.query(s) }
end

q = ->(s) { "'#{c.escape(s)}'" }
dt6 = Time.new(2024, 2, 29, 23, 59, Rational(58_123_456, 1_000_000))

def blob_verify(row, data)
  sha = Digest::SHA256.hexdigest(data)
  expect('LENGTH, SHA2 on the server', [row[0], row[1]], [1 << 20, sha])
  expect("sha256 of the value read back (length #{row[2].bytesize})", Digest::SHA256.hexdigest(row[2]), sha)
end

def load_file
  f = Tempfile.new(['compat-load-', '.csv'])
  (1..1000).each { |i| f.write("#{i},name-#{i}#{i == 1000 ? " \u{1F42C}" : ''}\n") }
  f.close
  f
end

def load_sql(path) = "LOAD DATA LOCAL INFILE '#{path}' INTO TABLE loaded CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' (id, name)"

LOAD_CHECK = 'SELECT COUNT(*), SUM(id), MAX(name), (SELECT name FROM loaded WHERE id = 1000) FROM loaded'
LOAD_WANT = [[1000, BigDecimal('500500'), 'name-999', "name-1000 \u{1F42C}"]].freeze

def dup_verify
  yield
  raise CheckFailed, 'the duplicate INSERT succeeded'
rescue Mysql2::Error => e
  expect('error code, SQLSTATE', [e.error_number, e.sql_state], [1062, '23000'])
end

# --- text protocol (escaped literals) ---
check('params.text') do
  expect('SELECT', rows(c, "SELECT #{q[TRICKY]}, 42"), [[TRICKY, 42]])
  c.query("INSERT INTO vals (k, i, s) VALUES ('params-text', 42, #{q[TRICKY]})")
  expect('row', rows(c, "SELECT i, s FROM vals WHERE k = 'params-text'"), [[42, TRICKY]])
end
check('nulls.text') do
  c.query("INSERT INTO vals (k, i, s, d, dt, b) VALUES ('nulls-text', NULL, NULL, NULL, NULL, NULL)")
  expect('row', rows(c, "SELECT i, s, d, dt, b FROM vals WHERE k = 'nulls-text'"), [[nil, nil, nil, nil, nil]])
end
check('emoji.text') do
  expect('SELECT', rows(c, "SELECT #{q[EMOJI]}"), [[EMOJI]])
  c.query("INSERT INTO vals (k, s) VALUES ('emoji-text', #{q[EMOJI]})")
  expect('row', rows(c, "SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = 'emoji-text'"),
         [[EMOJI, EMOJI.length, EMOJI.bytesize]])
end
check('decimal.text') do
  c.query("INSERT INTO vals (k, d) VALUES ('decimal-text', '#{DECIMAL}')")
  expect('row', rows(c, "SELECT d, d * 2 FROM vals WHERE k = 'decimal-text'"), [[BigDecimal(DECIMAL), BigDecimal(DECIMAL2)]])
end
check('datetime6.text') do
  c.query("INSERT INTO vals (k, dt) VALUES ('datetime6-text', '#{DATETIME6}')")
  r = rows(c, "SELECT dt, MICROSECOND(dt) FROM vals WHERE k = 'datetime6-text'")
  expect('row (usec)', [r[0][0], r[0][0].usec, r[0][1]], [dt6, 123_456, 123_456])
end
check('blob.text') do
  data = SecureRandom.random_bytes(1 << 20)
  c.query("INSERT INTO vals (k, b) VALUES ('blob-text', _binary'#{c.escape(data)}')")
  blob_verify(rows(c, "SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = 'blob-text'")[0], data)
end
check('txn.commit') do
  c.query('BEGIN')
  c.query("INSERT INTO tx VALUES (1, 'committed')")
  expect('inside the transaction', rows(c, 'SELECT v FROM tx WHERE id = 1'), [['committed']])
  c.query('COMMIT')
  expect('after COMMIT', rows(c, 'SELECT v FROM tx WHERE id = 1'), [['committed']])
end
check('txn.rollback') do
  c.query('START TRANSACTION')
  c.query("INSERT INTO tx VALUES (2, 'rolled back')")
  expect('inside the transaction', rows(c, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [[1]])
  c.query('ROLLBACK')
  expect('after ROLLBACK', rows(c, 'SELECT COUNT(*) FROM tx WHERE id = 2'), [[0]])
end
check('load_data_local.text') do
  f = load_file
  c.query('DELETE FROM loaded')
  c.query(load_sql(f.path))
  expect('affected rows', c.affected_rows, 1000)
  expect('COUNT, SUM, MAX(name), the emoji row', rows(c, LOAD_CHECK), LOAD_WANT)
ensure
  f&.unlink
end
check('call_multi_result.text') do
  sets = [c.query('CALL two_results(7)', as: :array).to_a]
  while c.next_result
    r = c.store_result
    sets << r.to_a if r
  end
  expect('result sets', sets, [[[7]], [['second-7', 14]]])
  expect('SELECT after the CALL', rows(c, "SELECT 'still working'"), [['still working']])
end
check('dup_key.text') do
  c.query("INSERT INTO dup VALUES (1, 'first')")
  dup_verify { c.query("INSERT INTO dup VALUES (1, 'second')") }
  expect('SELECT after the error', rows(c, 'SELECT v FROM dup WHERE id = 1'), [['first']])
end
check('ok_info.text') do
  # OK packets with an info string (multi-row INSERT, UPDATE), then the
  # session goes on.
  c.query('DELETE FROM dup WHERE id >= 100')
  c.query("INSERT INTO dup VALUES (100, 'x'), (101, 'y')")
  expect('affected rows, info of INSERT', [c.affected_rows, c.query_info_string], [2, 'Records: 2  Duplicates: 0  Warnings: 0'])
  c.query("UPDATE dup SET v = 'z' WHERE id >= 100")
  expect('affected rows, info of UPDATE', [c.affected_rows, c.query_info_string], [2, 'Rows matched: 2  Changed: 2  Warnings: 0'])
  expect('SELECT after', rows(c, "SELECT COUNT(*) FROM dup WHERE v = 'z'"), [[2]])
end
check('last_insert_id.text') do
  c.query("INSERT INTO vals (k) VALUES ('lid-text')")
  id = c.last_id
  raise CheckFailed, 'no insert id in the OK packet' if id.zero?
  expect('SELECT LAST_INSERT_ID()', rows(c, 'SELECT LAST_INSERT_ID()'), [[id]])
  expect("the row's id", rows(c, "SELECT id FROM vals WHERE k = 'lid-text'"), [[id]])
end
check('use_schema.text') do
  begin
    c.query("USE `#{DB}_a`")
    expect('USE a; SELECT', rows(c, 'SELECT v FROM t'), [['from-a']])
    c.select_db("#{DB}_b")
    expect('select_db b; SELECT', rows(c, 'SELECT v FROM t'), [['from-b']])
  ensure
    c.query("USE `#{DB}`")
  end
end

check('read_your_writes.text') do
  # DDL, then a read at once; a big write, then a read at once.
  c.query('DROP TABLE IF EXISTS ryw_text')
  c.query('CREATE TABLE ryw_text (id INT PRIMARY KEY, n INT)')
  expect('SELECT right after CREATE TABLE', rows(c, 'SELECT COUNT(*) FROM ryw_text'), [[0]])
  c.query('INSERT INTO ryw_text SELECT seq, seq FROM seq_1_to_10000')
  expect('SELECT right after INSERT ... SELECT', rows(c, 'SELECT COUNT(*), SUM(n) FROM ryw_text'), [[10_000, BigDecimal('50005000')]])
end

# --- server-side prepared statements ---
check('params.ps') do
  expect('SELECT ?, ?', prows(c, 'SELECT ?, ?', TRICKY, 42), [[TRICKY, 42]])
  prows(c, 'INSERT INTO vals (k, i, s) VALUES (?, ?, ?)', 'params-ps', 42, TRICKY)
  expect('row', prows(c, 'SELECT i, s FROM vals WHERE k = ?', 'params-ps'), [[42, TRICKY]])
end
check('nulls.ps') do
  prows(c, 'INSERT INTO vals (k, i, s, d, dt, b) VALUES (?, ?, ?, ?, ?, ?)', 'nulls-ps', nil, nil, nil, nil, nil)
  expect('row', prows(c, 'SELECT i, s, d, dt, b, ? IS NULL FROM vals WHERE k = ?', nil, 'nulls-ps'),
         [[nil, nil, nil, nil, nil, 1]])
end
check('emoji.ps') do
  expect('SELECT ?', prows(c, 'SELECT ?', EMOJI), [[EMOJI]])
  prows(c, 'INSERT INTO vals (k, s) VALUES (?, ?)', 'emoji-ps', EMOJI)
  expect('row', prows(c, 'SELECT s, CHAR_LENGTH(s), LENGTH(s) FROM vals WHERE k = ?', 'emoji-ps'),
         [[EMOJI, EMOJI.length, EMOJI.bytesize]])
end
check('decimal.ps') do
  prows(c, 'INSERT INTO vals (k, d) VALUES (?, ?)', 'decimal-ps', BigDecimal(DECIMAL))
  expect('row', prows(c, 'SELECT d, d * 2 FROM vals WHERE k = ?', 'decimal-ps'), [[BigDecimal(DECIMAL), BigDecimal(DECIMAL2)]])
end
check('datetime6.ps') do
  prows(c, 'INSERT INTO vals (k, dt) VALUES (?, ?)', 'datetime6-ps', dt6)
  r = prows(c, 'SELECT dt, MICROSECOND(dt) FROM vals WHERE k = ?', 'datetime6-ps')
  expect('row (usec)', [r[0][0], r[0][0].usec, r[0][1]], [dt6, 123_456, 123_456])
end
check('blob.ps') do
  data = SecureRandom.random_bytes(1 << 20)
  prows(c, 'INSERT INTO vals (k, b) VALUES (?, ?)', 'blob-ps', data)
  blob_verify(prows(c, 'SELECT LENGTH(b), SHA2(b, 256), b FROM vals WHERE k = ?', 'blob-ps')[0], data)
end
check('load_data_local.ps') do
  f = load_file
  c.query('DELETE FROM loaded')
  st = c.prepare(load_sql(f.path))
  st.execute
  expect('affected rows', st.affected_rows, 1000)
  st.close
  expect('COUNT, SUM, MAX(name), the emoji row', prows(c, LOAD_CHECK), LOAD_WANT)
ensure
  f&.unlink
end
skip('call_multi_result.ps', 'mysql2 0.5.3 has no multi-result API for statements (Client#store_result after a prepared CALL segfaults)')
check('dup_key.ps') do
  dup_verify { prows(c, 'INSERT INTO dup VALUES (?, ?)', 1, 'second') }
  expect('SELECT after the error', prows(c, 'SELECT v FROM dup WHERE id = ?', 1), [['first']])
end
check('ok_info.ps') do
  prows(c, 'DELETE FROM dup WHERE id >= ?', 200)
  st = c.prepare('INSERT INTO dup VALUES (?, ?), (?, ?)')
  st.execute(200, 'x', 201, 'y')
  expect('affected rows of INSERT', st.affected_rows, 2)
  st.close
  st = c.prepare('UPDATE dup SET v = ? WHERE id >= ?')
  st.execute('w', 200)
  expect('affected rows of UPDATE', st.affected_rows, 2)
  st.close
  expect('SELECT after', prows(c, 'SELECT COUNT(*) FROM dup WHERE v = ?', 'w'), [[2]])
end
check('last_insert_id.ps') do
  st = c.prepare('INSERT INTO vals (k) VALUES (?)')
  st.execute('lid-ps')
  id = st.last_id
  st.close
  raise CheckFailed, 'no insert id in the OK packet' if id.zero?
  expect('SELECT LAST_INSERT_ID()', prows(c, 'SELECT LAST_INSERT_ID()'), [[id]])
  expect("the row's id", prows(c, 'SELECT id FROM vals WHERE k = ?', 'lid-ps'), [[id]])
end
check('ps_schema') do
  begin
    c.query("USE `#{DB}_a`")
    sa = c.prepare('SELECT v FROM t')
    expect('USE a; prepare; execute', sa.execute(as: :array).to_a, [['from-a']])
    c.query("USE `#{DB}_b`")
    sb = c.prepare('SELECT v FROM t')
    expect('USE b; prepare the same text; execute', sb.execute(as: :array).to_a, [['from-b']])
    expect('the first statement again', sa.execute(as: :array).to_a, [['from-a']])
    sa.close
    sb.close
  ensure
    c.query("USE `#{DB}`")
  end
end

check('read_your_writes.ps') do
  # Prepared right after the DDL, executed right after each write.
  c.query('DROP TABLE IF EXISTS ryw_ps')
  c.query('CREATE TABLE ryw_ps (id INT PRIMARY KEY, n INT)')
  st = c.prepare('SELECT COUNT(*), SUM(n) FROM ryw_ps')
  expect('prepare and execute right after CREATE TABLE', st.execute(as: :array).to_a, [[0, nil]])
  c.query('INSERT INTO ryw_ps SELECT seq, seq FROM seq_1_to_10000')
  expect('execute right after INSERT ... SELECT', st.execute(as: :array).to_a, [[10_000, BigDecimal('50005000')]])
  prows(c, 'UPDATE ryw_ps SET n = n + ?', 1)
  expect('execute right after a prepared UPDATE', st.execute(as: :array).to_a, [[10_000, BigDecimal('50015000')]])
  st.close
end

# --- session ---
check('warnings.select') do
  expect('SELECT CAST', rows(c, "SELECT CAST('12abc' AS SIGNED)"), [[12]])
  expect('warning_count', c.warning_count, 1)
  w = rows(c, 'SHOW WARNINGS')
  unless w.size == 1 && w[0][1] == 1292 && w[0][2].include?('12abc')
    raise CheckFailed, "SHOW WARNINGS after SELECT CAST('12abc' AS SIGNED): #{show(w)}"
  end
end
check('warnings.dml') do
  c.query("INSERT IGNORE INTO dup VALUES (1, 'ignored')")
  w = rows(c, 'SHOW WARNINGS')
  raise CheckFailed, "SHOW WARNINGS after INSERT IGNORE of a duplicate: #{show(w)}" unless w.size == 1 && w[0][1] == 1062
end
check('warnings.fresh') do
  4.times { rows(c, "SELECT CAST('x' AS SIGNED)") }
  f = connect
  begin
    expect('first SHOW WARNINGS of a new connection', rows(f, 'SHOW WARNINGS'), [])
  ensure
    f.close
  end
end
check('connection_id') do
  expect("SELECT CONNECTION_ID() vs the handshake's thread id", rows(c, 'SELECT CONNECTION_ID()'), [[c.thread_id]])
end
check('reconnect') do
  c.query("SET @compat_marker = 'old session'")
  old = c.thread_id
  c.close
  c = connect
  expect('user variable and schema after reconnecting', rows(c, 'SELECT @compat_marker, DATABASE()'), [[nil, DB]])
  raise CheckFailed, "same thread id #{old} after reconnecting" if c.thread_id == old
end
check('driver_reconnect') do
  victim = connect(reconnect: true)
  old = victim.thread_id
  c.query("KILL #{old}")
  sleep 0.2
  r = begin
    rows(victim, "SELECT 'reconnected', DATABASE()")
  rescue Mysql2::Error => e
    # libmariadb reconnects on the next command after the one that found the
    # connection gone; mysql2 documents retrying once.
    warn "first query after the kill: #{e.message}"
    rows(victim, "SELECT 'reconnected', DATABASE()")
  end
  expect('SELECT after the kill', r, [['reconnected', DB]])
  raise CheckFailed, "same thread id #{old} after the kill" if victim.thread_id == old
  victim.close
end
skip('change_user', 'mysql2 has no change_user')
c.close
