#!/usr/bin/env ruby
# frozen_string_literal: true
#
# The shipped HAProxy configuration (deploy/haproxy/haproxy.cfg) in front of
# a local three-node cluster (--failover=auto, TLS, -f 0), with Debian's
# haproxy and ruby-beaneater: a producer putting about 200 jobs a second,
# one at a time, and a worker reserving and deleting, each on its own
# connection through HAProxy, with reconnect-and-retry. Faults: kill -9 of
# the primary; with three nodes, a switchover between the two left while
# the killed node is down; the node started again; then a switchover with
# every node up. Checked:
# nothing acknowledged is lost (every acknowledged job was deleted by the
# worker or is still there); HAProxy never logs "no server available" nor
# a <NOSRV> connection; the producer's longest stall (from the start of a
# put, retries included, to its INSERTED) after the kill is at most the
# failover time + STALL_SLACK_KILL (+ --sync-timeout with two data nodes:
# the survivor acknowledges alone only after it), after the switchover at most
# STALL_MAX_SWITCHOVER; the producer and the worker reconnect at most
# MAX_RECONNECTS times per fault (no reconnect storm). Prints the figures
# (RESULT line) that docs/benchmarks.md records.
#
#   BQ_CTL=build/beanstalkctl BQ_MKCERTS=deploy/mkcerts \
#     BQ_HAPROXY_CFG=deploy/haproxy/haproxy.cfg ruby tests/lb/haproxy_failover.rb build/beanstalkd-ha
# Environment: BQ_LB_ROUNDS (default 1) repeats the two faults;
# BQ_LB_QUEUE=N puts N jobs of 100 bytes in the default tube first (with
# BQ_BENCH, the path of bq-bench) and checks they are all there at the end;
# BQ_LB_WITNESS=1 runs two data nodes and a witness (n3) behind
# deploy/haproxy/haproxy-witness.cfg (give it as BQ_HAPROXY_CFG).

require 'beaneater'
require_relative '../clients/count_connects'
require_relative '../clients/local_cluster'

$stdout.sync = true

WATCHDOG_SECONDS = Integer(ENV.fetch('BQ_LB_WATCHDOG', '280'))
TUBE = 'lb'
ACKS_BETWEEN = 300          # puts acknowledged before and after each fault
STALL_SLACK_KILL = 1.5      # CI bound over the failover time (target 0.3 s: benchmarks)
STALL_MAX_SWITCHOVER = 1.0  # CI bound (target 0.3 s: benchmarks)
MAX_RECONNECTS = 4          # per fault, producer and worker together
SYNC_TIMEOUT = 2.0          # the default --sync-timeout, in seconds

server, ctl, mkcerts, cfg = ARGV[0], ENV['BQ_CTL'], ENV['BQ_MKCERTS'], ENV['BQ_HAPROXY_CFG']
unless server && ctl && mkcerts && cfg
  fail!('usage: BQ_CTL=... BQ_MKCERTS=... BQ_HAPROXY_CFG=... haproxy_failover.rb SERVER')
end
haproxy = ENV.fetch('BQ_HAPROXY', 'haproxy')
unless system(haproxy, '-v', out: File::NULL, err: File::NULL)
  fail!("#{haproxy} is missing, and BQ_REQUIRE_ALL is set (CI installs it)") if ENV.fetch('BQ_REQUIRE_ALL', '0') != '0'
  warn "skipped: #{haproxy} is missing (apt-get install haproxy)"
  exit 77
end
witness = ENV.fetch('BQ_LB_WITNESS', '0') == '1'
cluster = LocalCluster.new(server, ctl, mkcerts, 'bq-lb', WATCHDOG_SECONDS, witness: witness)
nodes = cluster.nodes
lb_port = free_port
env = { 'BQ_CERTS' => cluster.certs, 'BQ_LB_BIND' => "127.0.0.1:#{lb_port}" }
nodes.each_with_index do |n, i|
  env["BQ_N#{i + 1}"] = "127.0.0.1:#{n[:client]}"
  env["BQ_N#{i + 1}_ADMIN"] = n[:admin].to_s
end
lb_log = "#{cluster.work}/haproxy.log"
cluster.start_all
primary = wait_until('a primary with both standbys streaming', 30) { cluster.settled }
queue = Integer(ENV.fetch('BQ_LB_QUEUE', '0'))
if queue.positive?
  $step = "a queue of #{queue} jobs"
  fill_started = monotonic
  system(ENV.fetch('BQ_BENCH'), '-p', primary[:client].to_s, '-w', 'fill', '-n', queue.to_s, '-s', '100',
         '-c', '8', '-P', '64', out: File::NULL) || fail!('bq-bench fill failed')
  wait_until('the standbys caught up with the queue', 600) do
    st = cluster.status(primary)
    st && st['standbys'].all? { |sb| sb['state'] == 'witness' || sb['lag_records'].zero? }
  end
  puts format('queue: %d jobs held in the default tube (%.1f s to put and replicate)', queue, monotonic - fill_started)
  $step = 'startup'
end
cluster.own(Process.spawn(env, haproxy, '-db', '-f', cfg, in: File::NULL,
                          out: [lb_log, 'a'], err: [lb_log, 'a'], pgroup: true))
wait_until('HAProxy listening', 10) do
  TCPSocket.new('127.0.0.1', lb_port).close || true
rescue StandardError
  false
end
# Every server checked UP by HAProxy before the faults begin.
wait_until('HAProxy seeing every server', 10) do
  Beaneater.new("127.0.0.1:#{lb_port}").tap(&:close)
  File.read(lb_log).scan(/is DOWN/).empty?
end
puts "haproxy on 127.0.0.1:#{lb_port}; primary #{primary[:name]}#{witness ? ' (n3 a witness)' : ''}"

lock = Mutex.new
acked = {}
deleted = {}
deleting = {} # deletes sent (their outcome may be unknown: the connection broke)
stalls = [] # [started_at, seconds] of every acknowledged put
refused = 0
unknown = 0
stop = false

# A connection through HAProxy that uses and watches TUBE, made again
# (after 50 ms) until it works.
def lb_connect(port)
  loop do
    b = Beaneater.new("127.0.0.1:#{port}")
    b.tubes.use(TUBE)
    b.tubes.watch!(TUBE)
    return b
  rescue StandardError
    sleep 0.05
  end
end

producer = Thread.new do
  bean = lb_connect(lb_port)
  n = 0
  until stop
    n += 1
    put_started = monotonic # (a name of this block only: threads share top-level locals)
    begin
      r = bean.tubes[TUBE].put("lb-#{n}")
      lock.synchronize do
        acked[r[:id].to_i] = true
        stalls << [put_started, monotonic - put_started]
      end
    rescue Beaneater::DrainingError, Beaneater::OutOfMemoryError
      lock.synchronize { refused += 1 }
      sleep 0.05
      retry
    rescue StandardError => e
      puts "producer: #{e.class}: #{e.message}; reconnecting"
      # The connection broke with the put in flight: its outcome is unknown
      # (it is not counted as acknowledged); a new connection, the next put.
      lock.synchronize { unknown += 1 }
      bean.close rescue nil
      sleep 0.05
      bean = lb_connect(lb_port)
    end
    sleep 0.005
  end
  bean.close rescue nil
end

worker = Thread.new do
  bean = lb_connect(lb_port)
  until stop
    id = nil
    begin
      job = bean.tubes.reserve(1)
      id = job.id.to_i
      lock.synchronize { deleting[id] = true }
      job.delete
      lock.synchronize { deleted[id] = true }
    rescue Beaneater::TimedOutError
      next
    rescue Beaneater::NotFoundError
      # Beaneater sends a command again after it reconnects: a delete done
      # before the connection broke then finds nothing.
      lock.synchronize { deleted[id] = true } if id
    rescue StandardError => e
      puts "worker: #{e.class}: #{e.message} (job #{id.inspect}); reconnecting"
      bean.close rescue nil
      sleep 0.05
      bean = lb_connect(lb_port)
    end
  end
  bean.close rescue nil
end

# The longest stall of a put started at or after t.
def longest_stall(lock, stalls, t)
  lock.synchronize { stalls.select { |s, _| s >= t - 0.5 }.map { |_, d| d }.max.to_f }
end

results = []
printed = 0
# A switchover from primary from to node to, its figures recorded as what.
switch_over = lambda do |from, to, what|
  connects = CountConnects.count
  t0 = monotonic
  cluster.ctl(from, 'switchover', '--to', to[:name]) || fail!('beanstalkctl switchover failed')
  took = monotonic - t0
  wait_grown(lock, ACKS_BETWEEN, 'acknowledged puts after the switchover') { acked.size }
  results << { what: what, failover: took, stall: longest_stall(lock, stalls, t0),
               reconnects: CountConnects.count - connects }
end
rounds = Integer(ENV.fetch('BQ_LB_ROUNDS', '1'))
rounds.times do |round|
  $step = "round #{round + 1}: kill -9"
  wait_until('a settled primary', 30) { primary = cluster.settled }
  wait_grown(lock, ACKS_BETWEEN, 'acknowledged puts before the kill') { acked.size }
  connects = CountConnects.count
  t0 = monotonic
  cluster.kill(primary)
  survivors = cluster.data_nodes.reject { |n| n == primary }
  newp = wait_until('a new primary', 30) do
    survivors.find { |n| (st = cluster.status(n)) && st['role'] == 'primary' }
  end
  failover = monotonic - t0
  wait_grown(lock, ACKS_BETWEEN, 'acknowledged puts after the kill') { acked.size }
  stall = longest_stall(lock, stalls, t0)
  results << { what: 'kill', failover: failover, stall: stall,
               reconnects: CountConnects.count - connects }
  # With one node down (three nodes: two left), a switchover between the
  # two that are left.
  other = survivors.find { |n| n != newp }
  if other && cluster.data_nodes.size == 3
    $step = "round #{round + 1}: switchover with a node down"
    wait_until('the other survivor streaming', 30) { cluster.settled == newp }
    switch_over.call(newp, other, 'switchover-1-down')
    newp = other
  end
  cluster.start(primary)

  $step = "round #{round + 1}: switchover"
  primary = wait_until('the killed node streaming again', 60) do
    p = cluster.settled
    p == newp && p
  end
  target = cluster.data_nodes.find { |n| n != primary }
  wait_grown(lock, ACKS_BETWEEN, 'acknowledged puts before the switchover') { acked.size }
  switch_over.call(primary, target, 'switchover')
  results.last(results.size - printed).each do |r|
    puts format('%-17s failover %5d ms, producer stall %5d ms, reconnects %d', r[:what],
                r[:failover] * 1000, r[:stall] * 1000, r[:reconnects])
  end
  printed = results.size
end

$step = 'history'
stop = true
producer.join
worker.join
check = Beaneater.new("127.0.0.1:#{lb_port}")
lost = acked.keys.reject { |id| deleted[id] }.reject do |id|
  check.jobs.find(id)
rescue StandardError
  false
end
held = check.tubes['default'].stats.current_jobs_ready
check.close
fail!("the queue held #{held} jobs at the end, want #{queue}") if held != queue
# A job the worker sent a delete for, whose reply never came, may be gone.
unknown_deletes = lost.select { |id| deleting[id] }
lost -= unknown_deletes
fail!("acknowledged jobs lost: #{lost.first(10)}") unless lost.empty?
puts "ok: #{acked.size} puts acknowledged, #{deleted.size} deleted, none lost " \
     "(#{unknown} puts and #{unknown_deletes.size} deletes with an unknown outcome, #{refused} refused)"
log = File.read(lb_log)
nosrv = log.scan('<NOSRV>').size
fail!("HAProxy logged 'no server available' during a normal failover") if log.include?('no server available')
fail!("HAProxy logged #{nosrv} <NOSRV> connections") if nosrv.positive?
resyncs = nodes.sum { |n| File.read("#{cluster.work}/#{n[:name]}.log").scan(/following the primary.*start=resync/).size }
fail!("#{resyncs} full resyncs of caught-up standbys (want 0)") if resyncs.positive?
results.each do |r|
  # Two data nodes: the survivor has no standby to be in sync with, so its
  # replies wait --sync-timeout before it acknowledges alone (degraded).
  bound = r[:what] == 'kill' ? r[:failover] + STALL_SLACK_KILL + (witness ? SYNC_TIMEOUT : 0) : STALL_MAX_SWITCHOVER
  fail!(format('%s: producer stall %.2f s, bound %.2f s', r[:what], r[:stall], bound)) if r[:stall] > bound
  fail!("#{r[:what]}: #{r[:reconnects]} reconnects, want at most #{MAX_RECONNECTS}") if r[:reconnects] > MAX_RECONNECTS
end
%w[kill switchover switchover-1-down].each do |w|
  rs = results.select { |r| r[:what] == w }
  next if rs.empty?
  over = rs.map { |r| r[:stall] - r[:failover] }.sort
  puts format('RESULT %s rounds=%d failover_ms_max=%d stall_ms_median=%d stall_ms_max=%d ' \
              'stall_over_failover_ms_median=%d stall_over_failover_ms_max=%d reconnects_max=%d',
              w, rs.size, rs.map { |r| r[:failover] }.max * 1000,
              rs.map { |r| r[:stall] }.sort[rs.size / 2] * 1000, rs.map { |r| r[:stall] }.max * 1000,
              over[rs.size / 2] * 1000, over.last * 1000, rs.map { |r| r[:reconnects] }.max)
end
puts "RESULT haproxy nosrv=#{nosrv} refused=#{refused} unknown=#{unknown} resyncs=#{resyncs}"
exit 0
