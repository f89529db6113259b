# frozen_string_literal: true
#
# The web console's cost with a large queue (tests/bench/console runs it):
# a local three-node cluster (tests/clients/local_cluster.rb) holding
# BQ_CONSOLE_JOBS jobs of 100 bytes (bq-bench -w fill, tube default), and the
# console's reads timed one request at a time, as the page makes them:
# /api/queue (list-tubes, stats and stats-tube on a new connection of the
# node's own client service), /api/peek (use, peek-ready, stats-job) and
# /api/job (peek, stats-job), on the primary's console and on a standby's
# (proxied to the primary). The baseline is the same beanstalk commands on a
# new client connection, timed the same way, against the primary and
# against Debian's beanstalkd holding the same jobs, in the same run.
# Prints a table: median and p99 in milliseconds, and the ratio of each
# median to beanstalkd's commands.
#   BQ_CTL=... BQ_MKCERTS=... BQ_BENCH=... ruby tests/bench/console.rb SERVER

require_relative '../clients/local_cluster'

server = ARGV.fetch(0)
jobs = Integer(ENV.fetch('BQ_CONSOLE_JOBS', '1000000'))
rounds = Integer(ENV.fetch('BQ_CONSOLE_ROUNDS', '200'))
bench = ENV.fetch('BQ_BENCH')

def fill(bench, port, jobs)
  system(bench, '-p', port.to_s, '-w', 'fill', '-n', jobs.to_s, '-s', '100', '-c', '8', '-P', '64',
         out: File::NULL) || fail!('bq-bench fill failed')
end

# The milliseconds of each of rounds calls of the block.
def timed(rounds)
  (1..rounds).map do
    t = monotonic
    yield
    (monotonic - t) * 1000
  end
end

# One reply: its line, and its body skipped.
def reply(sock)
  line = sock.gets("\r\n")
  n = line[/\A(?:OK|FOUND \d+) (\d+)\r\n\z/, 1]
  sock.read(Integer(n) + 2) if n
  line
end

# cmds on a new connection to port, every reply read.
def direct(port, cmds)
  s = TCPSocket.new('127.0.0.1', port)
  s.write(cmds.map { |c| "#{c}\r\n" }.join)
  cmds.each { reply(s) }
ensure
  s&.close
end

PASSWORD = 'console-bench-password'

# The session cookie of a login on the console at port.
def login(port)
  http = Net::HTTP.new('127.0.0.1', port)
  res = http.post('/api/login', '', 'Authorization' => "Bearer #{PASSWORD}")
  fail!("login: #{res.code} #{res.body}") unless res.code == '200'
  res['Set-Cookie'][/\A[^;]+/]
end

def get(port, path, cookie)
  http = Net::HTTP.new('127.0.0.1', port)
  res = http.get(path, 'Cookie' => cookie)
  fail!("GET #{path}: #{res.code} #{res.body}") unless res.code == '200'
end

def stats(ms)
  s = ms.sort
  [s[s.size / 2], s[(s.size * 99) / 100]]
end

cluster = LocalCluster.new(server, ENV.fetch('BQ_CTL'), ENV.fetch('BQ_MKCERTS'), 'bq-console-bench', 1800)
File.write("#{cluster.work}/password", "#{PASSWORD}\n", perm: 0o600)
ENV['BQ_NODE_FLAGS'] = "#{ENV.fetch('BQ_NODE_FLAGS', '')} --console-password-file #{cluster.work}/password"
cluster.start_all
primary = wait_until('a settled primary', 60) { cluster.settled }
standby = cluster.nodes.find { |n| n != primary }
$step = 'fill'
fill(bench, primary[:client], jobs)
wait_until('the standbys caught up', 600) do
  st = cluster.status(primary)
  st && st['standbys'].all? { |sb| sb['lag_records'].zero? }
end
ref_port = free_port
ref = Process.spawn('/usr/bin/beanstalkd', '-l', '127.0.0.1', '-p', ref_port.to_s, err: File::NULL)
cluster.own(ref)
wait_until('beanstalkd up', 10) { TCPSocket.new('127.0.0.1', ref_port).close || true rescue false }
fill(bench, ref_port, jobs)
tube = 'default' # where bq-bench puts them
id = jobs / 2
queue_cmds = ['list-tubes', 'stats', "stats-tube #{tube}"]
peek_cmds = ["use #{tube}", 'peek-ready', "stats-job #{id}"]
job_cmds = ["peek #{id}", "stats-job #{id}"]
rows = []
$step = 'measure'
cookies = { primary => login(primary[:admin]), standby => login(standby[:admin]) }
[['queue', queue_cmds, '/api/queue'], ['peek', peek_cmds, "/api/peek?tube=#{tube}&state=ready"],
 ['job', job_cmds, "/api/job?id=#{id}"]].each do |name, cmds, path|
  base = stats(timed(rounds) { direct(ref_port, cmds) })[0]
  [['beanstalkd, the commands', -> { direct(ref_port, cmds) }],
   ['primary, the commands', -> { direct(primary[:client], cmds) }],
   ["primary's console #{path}", -> { get(primary[:admin], path, cookies[primary]) }],
   ["standby's console #{path}", -> { get(standby[:admin], path, cookies[standby]) }]].each do |what, call|
    med, p99 = stats(timed(rounds, &call))
    rows << format('| %-5s | %-58s | %6.2f | %6.2f | %5.2f |', name, what, med, p99, med / base)
  end
end
puts "#{jobs} jobs held, #{rounds} requests each, one at a time; load #{File.read('/proc/loadavg').split[0]}"
puts '| read  | what                                                       | median ms | p99 ms | / beanstalkd |'
puts '|---|---|---:|---:|---:|'
rows.each { |r| puts r }
exit 0
