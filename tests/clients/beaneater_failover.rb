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
# or still there), and per role change at most one failed command and two
# reconnects (the proxy keeps the connection unless a change, a put or a
# delete, was in flight: its outcome is unknown and the connection closes,
# as a broken one always did; Beaneater reconnects by itself, and a
# reconnect during a switchover's pause may meet it again). Writes refused
# while a switchover pauses them (DRAINING, OUT_OF_MEMORY) are counted
# apart. Prints the figures: reconnects, failed and refused commands, the
# longest gap between two completed cycles around each role change.
#
#   BQ_CTL=build/beanstalkctl BQ_MKCERTS=deploy/mkcerts \
#     ruby tests/clients/beaneater_failover.rb build/beanstalkd-ha

require 'beaneater'
require 'json'
require 'net/http'
require 'socket'
require 'tmpdir'

WATCHDOG_SECONDS = 240
TUBE = 'rb-fo'
CYCLES = 150 # completed cycles before each role change and after it

$step = 'startup'

# Counts Beaneater's own reconnects (it reconnects and retries on EOF).
module CountConnects
  class << self
    attr_accessor :count
  end
  self.count = 0

  def establish_connection
    CountConnects.count += 1
    super
  end
end
Beaneater::Connection.prepend(CountConnects)

def fail!(what)
  warn "FAIL [#{$step}]: #{what}"
  exit 1
end

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

def wait_until(what, seconds)
  deadline = monotonic + seconds
  until (v = yield)
    fail!("#{what} within #{seconds} s") if monotonic > deadline
    sleep 0.05
  end
  v
end

def free_port
  s = TCPServer.new('127.0.0.1', 0)
  s.addr[1]
ensure
  s&.close
end

server, ctl, mkcerts = ARGV[0], ENV['BQ_CTL'], ENV['BQ_MKCERTS']
fail!('usage: BQ_CTL=... BQ_MKCERTS=... beaneater_failover.rb SERVER') unless server && ctl && mkcerts
work = Dir.mktmpdir('bq-client-fo')
certs = "#{work}/certs"
system(mkcerts, certs, 'n1', 'n2', 'n3', 'beanstalkctl', out: File::NULL, err: File::NULL) ||
  fail!('deploy/mkcerts failed')
nodes = (1..3).map { |i| { name: "n#{i}", client: free_port, repl: free_port, admin: free_port } }
peers = nodes.flat_map { |n| ['--peer', "#{n[:name]}=127.0.0.1:#{n[:repl]}"] }
pids = {}

start = lambda do |n|
  Dir.mkdir("#{work}/#{n[:name]}") unless Dir.exist?("#{work}/#{n[:name]}")
  pids[n[:name]] = Process.spawn(
    server, '-l', '127.0.0.1', '-p', n[:client].to_s, '-b', "#{work}/#{n[:name]}", '-f', '0',
    '--node-id', n[:name], *peers, '--role=standby', '--failover=auto',
    '--admin-listen', "127.0.0.1:#{n[:admin]}", '--status-interval', '0',
    '--tls-cert', "#{certs}/#{n[:name]}.pem", '--tls-key', "#{certs}/#{n[:name]}.key",
    '--tls-ca', "#{certs}/ca.pem", in: File::NULL, err: ["#{work}/#{n[:name]}.log", 'a'],
    pgroup: true
  )
end

cleanup = lambda do
  pids.each_value { |pid| Process.kill('KILL', pid) rescue nil }
  pids.each_value { |pid| Process.waitpid(pid) rescue nil }
end
at_exit do
  cleanup.call
  FileUtils.rm_rf(work) if $!.nil? || ($!.is_a?(SystemExit) && $!.success?)
end
Thread.new do
  sleep WATCHDOG_SECONDS
  warn "FAIL [#{$step}]: the whole run took more than #{WATCHDOG_SECONDS} s"
  cleanup.call
  exit! 1
end

def status(n)
  JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{n[:admin]}/status")))
rescue StandardError
  nil
end

# The primary with both standbys streaming (or nil).
def settled(nodes)
  nodes.each do |n|
    st = status(n)
    next unless st && st['role'] == 'primary'
    streaming = st['standbys'].count { |s| s['state'] == 'streaming' }
    return n if streaming == 2
  end
  nil
end

nodes.each { |n| start.call(n) }
primary = wait_until('a primary with both standbys streaming', 30) { settled(nodes) }
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

def wait_cycles(lock, times, more, what)
  target = cycles(lock, times) + more
  wait_until("#{more} more cycles #{what}", 60) { cycles(lock, times) >= target }
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
  wait_cycles(lock, cycle_times, CYCLES, "before #{what}")
  from = cycles(lock, cycle_times)
  connects = CountConnects.count
  failed_before = lock.synchronize { failed.size }
  t0 = monotonic
  new_primary = change.call
  wait_cycles(lock, cycle_times, CYCLES, "after #{what}")
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
  ok = system(ctl, '--nodes', "#{primary[:name]}=127.0.0.1:#{primary[:admin]}",
              '--tls-cert', "#{certs}/beanstalkctl.pem", '--tls-key', "#{certs}/beanstalkctl.key",
              '--tls-ca', "#{certs}/ca.pem", 'switchover', '--to', third[:name],
              out: File::NULL)
  fail!('beanstalkctl switchover failed') unless ok
  wait_until('the switchover target leading', 30) { settled(nodes) == third && third }
end
check_session(bean)

role_change.call('kill -9 of the primary') do
  Process.kill('KILL', pids[third[:name]])
  Process.waitpid(pids.delete(third[:name]))
  wait_until('a new primary', 30) do
    nodes.find { |n| n != third && (st = status(n)) && st['role'] == 'primary' }
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
refused.each { |f| puts "  refused while writes paused: #{f}" }
puts "RESULT reconnects=#{reconnects} failed=#{failed.size} refused=#{refused.size} " +
     results.map { |r| "#{r[:what].split.first}_gap_ms=#{r[:gap_ms]}" }.join(' ')
bean.close
exit 0
