#!/usr/bin/env ruby
# frozen_string_literal: true
#
# Client-visible failover with Debian's unmodified ruby-beaneater: a
# three-node cluster (--failover=auto, TLS, -f 0) on loopback, one
# Beaneater connection to a standby (proxied to the primary) that uses and
# watches its own tube and runs put / reserve / delete one command at a
# time, through a switchover and then a kill -9 of the primary. Checked:
# the tube it uses and the tubes it watches are the same on the new
# primary, nothing it put is lost (every acknowledged job is deleted by it
# or still there), per role change at most one failed command and two
# reconnects (the proxy keeps the connection; one whose put or delete was in
# flight when its primary died is closed, its outcome unknown, as a broken
# one always was; Beaneater reconnects by itself), and no write refused:
# through a switchover writes wait (DRAINING or OUT_OF_MEMORY would be
# counted and fail the test). Prints the figures: reconnects, failed and
# refused commands, the longest gap between two completed cycles around
# each role change.
#
#   BQ_CTL=build/beanstalkctl BQ_MKCERTS=deploy/mkcerts \
#     ruby tests/clients/beaneater_failover.rb build/beanstalkd-ha

require 'beaneater'
require_relative 'count_connects'
require_relative 'local_cluster'

WATCHDOG_SECONDS = 240
TUBE = 'rb-fo'
CYCLES = 150 # completed cycles before each role change and after it

server, ctl, mkcerts = ARGV[0], ENV['BQ_CTL'], ENV['BQ_MKCERTS']
fail!('usage: BQ_CTL=... BQ_MKCERTS=... beaneater_failover.rb SERVER') unless server && ctl && mkcerts
cluster = LocalCluster.new(server, ctl, mkcerts, 'bq-client-fo', WATCHDOG_SECONDS)
nodes = cluster.nodes

cluster.start_all
primary = wait_until('a primary with both standbys streaming', 30) { cluster.settled }
standby = nodes.find { |n| n != primary }
third = nodes.find { |n| n != primary && n != standby }
puts "primary #{primary[:name]}; the client connects to the standby #{standby[:name]}"

$step = 'session'
bean = Beaneater.new("127.0.0.1:#{standby[:client]}")
bean.tubes.use(TUBE)
bean.tubes.watch!(TUBE)
tube = bean.tubes[TUBE]

# Checks the session with the worker paused between two cycles (one
# Beaneater connection serves one thread at a time).
def check_session(bean)
  $want_pause = true
  wait_until('the worker pausing', 30) { $paused } if $worker_running
  used = bean.tubes.used.name
  watched = bean.tubes.watched.map(&:name)
  fail!("the tube used is #{used}, want #{TUBE}") unless used == TUBE
  fail!("the tubes watched are #{watched}, want [#{TUBE}]") unless watched == [TUBE]
  puts "  ok  session: using #{used}, watching #{watched}"
ensure
  $want_pause = false
end
check_session(bean)
connects_before = CountConnects.count

# The worker: put, reserve, delete, one command at a time.
acked = {}
deleted = {}
failed = []
refused = []
cycle_times = []
lock = Mutex.new
stop = false
$want_pause = false
$paused = false
$worker_running = true
worker = Thread.new do
  n = 0
  until stop
    if $want_pause # the main thread uses the connection meanwhile
      $paused = true
      sleep 0.01 while $want_pause
      $paused = false
    end
    n += 1
    deleting = nil
    begin
      r = tube.put("job-#{n}")
      lock.synchronize { acked[r[:id].to_i] = true }
      job = bean.tubes.reserve(5)
      id = job.id.to_i
      deleting = id
      job.delete
      lock.synchronize do
        deleted[id] = true
        cycle_times << monotonic
      end
    rescue Beaneater::NotConnected => e
      fail!("the connection is gone for good: #{e.message}")
    rescue Beaneater::NotFoundError => e
      # Beaneater sends a command again after reconnecting: a delete done
      # before the connection broke then finds nothing.
      lock.synchronize do
        deleted[deleting] = true if deleting
        failed << "#{e.class}: #{e.message}"
      end
    rescue Beaneater::DrainingError, Beaneater::OutOfMemoryError => e
      lock.synchronize { refused << "#{e.class}: #{e.message}" }
    rescue StandardError => e
      lock.synchronize { failed << "#{e.class}: #{e.message}" }
    end
  end
end

def cycles(lock, times)
  lock.synchronize { times.size }
end

# The longest gap between completed cycles from index from on.
def longest_gap(lock, times, from)
  lock.synchronize do
    t = times[from..] || []
    t.each_cons(2).map { |a, b| b - a }.max.to_f
  end
end

results = []
role_change = lambda do |what, &change|
  $step = what
  wait_grown(lock, CYCLES, "cycles before #{what}") { cycle_times.size }
  from = cycles(lock, cycle_times)
  connects = CountConnects.count
  failed_before = lock.synchronize { failed.size }
  t0 = monotonic
  new_primary = change.call
  wait_grown(lock, CYCLES, "cycles after #{what}") { cycle_times.size }
  results << {
    what: what, new_primary: new_primary[:name], reconnects: CountConnects.count - connects,
    failed: lock.synchronize { failed.size } - failed_before,
    gap_ms: (longest_gap(lock, cycle_times, [from - 1, 0].max) * 1000).round,
    took_ms: ((monotonic - t0) * 1000).round
  }
  r = results.last
  puts "#{what}: new primary #{r[:new_primary]}, reconnects #{r[:reconnects]}, failed " \
       "commands #{r[:failed]}, longest gap between completed cycles #{r[:gap_ms]} ms"
end

role_change.call('switchover') do
  ok = cluster.ctl(primary, 'switchover', '--to', third[:name])
  fail!('beanstalkctl switchover failed') unless ok
  wait_until('the switchover target leading', 30) { cluster.settled == third && third }
end
check_session(bean)

role_change.call('kill -9 of the primary') do
  cluster.kill(third)
  wait_until('a new primary', 30) do
    nodes.find { |n| n != third && (st = cluster.status(n)) && st['role'] == 'primary' }
  end
end
check_session(bean)

$step = 'history'
stop = true
worker.join
lost = acked.keys.reject { |id| deleted[id] }.reject do |id|
  bean.jobs.find(id)
rescue StandardError
  false
end
fail!("acknowledged jobs lost: #{lost.first(10)}") unless lost.empty?
puts "  ok  #{acked.size} puts acknowledged, #{deleted.size} deleted, none lost"
reconnects = CountConnects.count - connects_before
failed.each { |f| puts "  failed command: #{f}" }
results.each do |r|
  fail!("#{r[:what]}: #{r[:reconnects]} reconnects, want at most 2") if r[:reconnects] > 2
  fail!("#{r[:what]}: #{r[:failed]} failed commands, want at most 1") if r[:failed] > 1
end
refused.each { |f| puts "  refused: #{f}" }
fail!("#{refused.size} writes refused (DRAINING or OUT_OF_MEMORY); writes wait through a switchover") unless refused.empty?
puts "RESULT reconnects=#{reconnects} failed=#{failed.size} refused=#{refused.size} " +
     results.map { |r| "#{r[:what].split.first}_gap_ms=#{r[:gap_ms]}" }.join(' ')
bean.close
exit 0
