#!/usr/bin/env ruby
# frozen_string_literal: true
#
# Client-compatibility test: drives Debian's unmodified ruby-beaneater library
# against a beanstalkd-compatible server and checks every answer it gets back.
# The program starts the server binary named by ARGV[0] on a free loopback
# port, runs a realistic workload through the public Beaneater API only (no
# raw protocol), and kills the server when done. It prints one line per check;
# it exits 0 when all checks pass and 1 with the failing step otherwise.
#
#   ruby beaneater_test.rb /path/to/beanstalkd-ha
#   ruby beaneater_test.rb /usr/bin/beanstalkd     # validates the test itself

require 'beaneater'
require 'socket'
require_relative 'free_port'

# Raised by every failed check; carries the step, expectation and observation.
class CheckFailed < StandardError; end

STARTUP_DEADLINE = 10.0   # seconds to wait for the server to accept
POLL_INTERVAL = 0.02      # seconds between connection attempts
WATCHDOG_SECONDS = 240    # whole-run limit; a hang is reported, not waited out
PC_JOBS = 1000            # jobs moved by the producer/consumer pair

$step = 'startup'
$checks = 0
$puts_done = 0

def step(name)
  $step = name
  puts "== #{name}"
end

def check(what, expected, got)
  ok = expected.is_a?(Range) ? expected.cover?(got) : expected == got
  unless ok
    raise CheckFailed, "#{what}: expected #{short(expected)}, got #{short(got)}"
  end
  $checks += 1
  puts "  ok  #{what} = #{short(got)}"
end

def check_raises(what, klass)
  yield
rescue klass => e
  $checks += 1
  puts "  ok  #{what} raised #{e.class.name.split('::').last}"
  e
rescue StandardError => e
  raise CheckFailed, "#{what}: expected #{klass}, got #{e.class}: #{e.message}"
else
  raise CheckFailed, "#{what}: expected #{klass}, got no error"
end

def short(value)
  text = value.inspect
  text.length > 120 ? "#{text[0, 100]}... (#{text.length} chars)" : text
end

def monotonic
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Waits for a condition with a deadline; returns the last value of the block.
def wait_until(what, seconds)
  limit = monotonic + seconds
  loop do
    value = yield
    return value if value
    raise CheckFailed, "#{what}: not reached within #{seconds} s" if monotonic > limit
    sleep POLL_INTERVAL
  end
end

# ---------------------------------------------------------------- server ---

def start_server(binary, port)
  Process.spawn(binary, '-l', '127.0.0.1', '-p', port.to_s, pgroup: true, in: File::NULL)
end

def server_exited?(pid)
  !Process.waitpid(pid, Process::WNOHANG).nil?
end

def wait_for_accept(pid, port)
  limit = monotonic + STARTUP_DEADLINE
  loop do
    raise CheckFailed, "server exited during startup (#{$?})" if server_exited?(pid)
    begin
      Socket.tcp('127.0.0.1', port, connect_timeout: 1).close
      return
    rescue Errno::ECONNREFUSED, Errno::ETIMEDOUT
      raise CheckFailed, "server not accepting on port #{port} after 10 s" if monotonic > limit
      sleep POLL_INTERVAL
    end
  end
end

def stop_server(pid)
  return unless pid
  Process.kill('KILL', pid)
  Process.waitpid(pid)
rescue Errno::ESRCH, Errno::ECHILD
  nil
end

# ---------------------------------------------------------------- helpers ---

def put(tube, body, **opts)
  res = tube.put(body, **opts)
  check("put #{short_body(body)} into #{tube.name}: status", 'INSERTED', res[:status])
  $puts_done += 1
  Integer(res[:id])
end

def short_body(body)
  body.bytesize > 16 ? "<#{body.bytesize} bytes>" : body.inspect
end

def check_job(what, job, expected)
  stats = job.stats
  expected.each { |key, value| check("#{what} job #{job.id} #{key}", value, stats[key]) }
end

def check_tube(tube, expected)
  stats = tube.stats
  expected.each { |key, value| check("stats-tube #{tube.name} #{key}", value, stats[key]) }
end

def check_server(client, expected)
  expected.each { |key, value| check("stats #{key}", value, client.stats[key]) }
end

def reserve_body(what, tube, timeout, body)
  job = tube.reserve(timeout)
  check("#{what}: reserved body", body.b, job.body.b)
  job
end

# ------------------------------------------------------------- workload ---

def phase_initial(bc, pid)
  step 'fresh server: stats, list-tubes, list-tube-used, list-tubes-watched'
  check('stats version is a YAML string', String, bc.stats.version.class)
  wait_until('current-connections is 2 (startup probe gone)', 5) do
    bc.stats.current_connections == 2
  end
  check_server(bc, pid: pid, current_jobs_ready: 0, total_jobs: 0, current_tubes: 1,
                   max_job_size: 65_535, current_connections: 2)
  check('list-tubes', ['default'], bc.tubes.all.map(&:name))
  check('list-tube-used', 'default', bc.tubes.used.name)
  check('list-tubes-watched', ['default'], bc.tubes.watched.map(&:name))
end

def phase_put(bc, ids)
  step 'put to several tubes with pri/delay/ttr'
  alpha = bc.tubes['bq-alpha']
  beta = bc.tubes['bq_beta']
  ids[:a_high] = put(alpha, 'a-high', pri: 5, ttr: 30)
  ids[:a_mid] = put(alpha, 'a-mid', pri: 50, ttr: 30)
  ids[:a_low] = put(alpha, 'a-low', pri: 100, ttr: 30)
  check('job ids increase by one', [ids[:a_high] + 1, ids[:a_high] + 2], [ids[:a_mid], ids[:a_low]])
  ids[:b_delayed] = put(beta, 'b-delayed', pri: 10, delay: 3600, ttr: 60)
  ids[:b_ready] = put(beta, 'b-ready', pri: 2000, ttr: 60)
  check_server(bc, current_jobs_ready: 4, current_jobs_urgent: 3, current_jobs_delayed: 1,
                   current_jobs_reserved: 0, current_jobs_buried: 0, total_jobs: 5,
                   cmd_put: 5, current_tubes: 3)
  check_tube(alpha, name: 'bq-alpha', current_jobs_ready: 3, current_jobs_urgent: 3,
                    total_jobs: 3, current_using: 0, current_watching: 0)
  check_tube(beta, name: 'bq_beta', current_jobs_ready: 1, current_jobs_urgent: 0,
                   current_jobs_delayed: 1, total_jobs: 2, current_using: 1)
  check('list-tubes', %w[bq-alpha bq_beta default], bc.tubes.all.map(&:name).sort)
  check('list-tube-used', 'bq_beta', bc.tubes.used.name)
  check_job('delayed', bc.jobs.find(ids[:b_delayed]),
            state: 'delayed', pri: 10, delay: 3600, ttr: 60, tube: 'bq_beta', reserves: 0)
end

def phase_peek(bc, ids)
  step 'peek ready/delayed/buried and peek by id'
  alpha = bc.tubes['bq-alpha']
  beta = bc.tubes['bq_beta']
  check('peek-ready bq-alpha (lowest pri first)', 'a-high', alpha.peek(:ready).body)
  check('peek-delayed bq_beta', 'b-delayed', beta.peek(:delayed).body)
  check('peek-delayed bq-alpha (none)', nil, alpha.peek(:delayed))
  check('peek-buried bq_beta (none)', nil, beta.peek(:buried))
  check('peek by id', 'a-low', bc.jobs.find(ids[:a_low]).body)
  check('peek unknown id', nil, bc.jobs.find(ids[:a_high] + 1_000_000))
end

def phase_reserve_delete(bc, ids)
  step 'reserve (no timeout) and delete'
  alpha = bc.tubes['bq-alpha']
  job = reserve_body('reserve bq-alpha', alpha, nil, 'a-high')
  check('reserved id', ids[:a_high], Integer(job.id))
  check_job('reserved', job, state: 'reserved', pri: 5, reserves: 1, ttr: 30,
                             tube: 'bq-alpha', time_left: 28..30)
  check_server(bc, current_jobs_reserved: 1, current_jobs_ready: 3)
  check('list-tubes-watched after Tube#reserve', ['bq-alpha'], bc.tubes.watched.map(&:name))
  check('delete', 'DELETED', job.delete[:status])
  check('peek deleted job', nil, bc.jobs.find(ids[:a_high]))
  check('deleted job exists?', false, job.exists?)
  check_raises('delete again', Beaneater::NotFoundError) { job.delete }
end

def phase_bury_release(bc, ids)
  step 'reserve-with-timeout 0, touch, bury; release with delay'
  alpha = bc.tubes['bq-alpha']
  mid = reserve_body('reserve-with-timeout 0', alpha, 0, 'a-mid')
  check('touch', 'TOUCHED', mid.touch[:status])
  check('bury pri 55', 'BURIED', mid.bury(pri: 55)[:status])
  check_job('buried', mid, state: 'buried', pri: 55, buries: 1, reserves: 1)
  check('peek-buried bq-alpha', ids[:a_mid], Integer(alpha.peek(:buried).id))
  low = reserve_body('reserve-with-timeout 0', alpha, 0, 'a-low')
  check('release pri 101 delay 1', 'RELEASED', low.release(pri: 101, delay: 1)[:status])
  check_job('released', low, state: 'delayed', pri: 101, delay: 1, releases: 1)
  check('peek-delayed bq-alpha', 'a-low', alpha.peek(:delayed).body)
  check('peek-ready bq-alpha (none)', nil, alpha.peek(:ready))
  check_tube(alpha, current_jobs_ready: 0, current_jobs_delayed: 1, current_jobs_buried: 1,
                    current_jobs_reserved: 0, total_jobs: 3, cmd_delete: 1)
  step 'delayed job becomes ready (reserve-with-timeout 10 waits for it)'
  low = reserve_body('reserve-with-timeout 10', alpha, 10, 'a-low')
  check_job('re-reserved', low, state: 'reserved', reserves: 2, releases: 1, pri: 101)
  check('delete', 'DELETED', low.delete[:status])
end

def phase_kick(bc, ids)
  step 'kick (tube) and kick-job'
  alpha = bc.tubes['bq-alpha']
  beta = bc.tubes['bq_beta']
  res = alpha.kick(5)
  check('kick 5 on bq-alpha', { status: 'KICKED', id: '1' }, res)
  check_job('kicked', bc.jobs.find(ids[:a_mid]), state: 'ready', kicks: 1, buries: 1)
  mid = reserve_body('reserve kicked job', alpha, 0, 'a-mid')
  check('delete', 'DELETED', mid.delete[:status])
  check('kick with nothing to kick', { status: 'KICKED', id: '0' }, alpha.kick(5))
  check('kick-job delayed job', 'KICKED', bc.jobs.find(ids[:b_delayed]).kick[:status])
  check_job('kick-job', bc.jobs.find(ids[:b_delayed]), state: 'ready', kicks: 1)
  ids[:b_bury] = put(beta, 'b-bury', pri: 0)
  job = reserve_body('reserve bq_beta', beta, 0, 'b-bury')
  check('bury', 'BURIED', job.bury[:status])
  check('kick-job buried job', 'KICKED', bc.jobs.find(ids[:b_bury]).kick[:status])
  check_job('kick-job', job, state: 'ready', kicks: 1, buries: 1)
  check_raises('kick-job on a ready job', Beaneater::NotFoundError) { job.kick }
end

def phase_drain_and_timeouts(bc)
  step 'drain bq_beta in priority order; TIMED_OUT immediately and after 1 s'
  beta = bc.tubes['bq_beta']
  %w[b-bury b-delayed b-ready].each do |body|
    job = reserve_body('reserve bq_beta', beta, 0, body)
    check("delete #{body}", 'DELETED', job.delete[:status])
  end
  check_raises('reserve-with-timeout 0 on empty tube', Beaneater::TimedOutError) { beta.reserve(0) }
  start = monotonic
  check_raises('reserve-with-timeout 1 on empty tube', Beaneater::TimedOutError) do
    bc.tubes['bq-empty'].reserve(1)
  end
  check('reserve-with-timeout 1 waited (s)', 0.5..5.0, (monotonic - start).round(2))
  check_server(bc, current_jobs_ready: 0, current_jobs_reserved: 0, current_jobs_delayed: 0,
                   current_jobs_buried: 0, total_jobs: 6, current_tubes: 3)
  check('unused empty tubes are gone', %w[bq-empty bq_beta default], bc.tubes.all.map(&:name).sort)
  check_tube(beta, total_jobs: 3, cmd_delete: 3, current_using: 1, current_watching: 0)
end

def phase_ttr(bc, bc2)
  step 'DEADLINE_SOON, TTR expiry hands the job to a waiting second connection'
  gamma = bc.tubes['bq.gamma']
  id = put(gamma, 'g-ttr1', ttr: 1)
  job = reserve_body('reserve ttr 1', gamma, 0, 'g-ttr1')
  check_raises('reserve while holding a job about to expire', Beaneater::DeadlineSoonError) do
    gamma.reserve(0)
  end
  waiter = Thread.new { bc2.tubes['bq.gamma'].reserve(10) }
  # The owner watches its job until the expiry is counted. Debian's beanstalkd 1.12
  # sometimes does not expire the job of an owner that stays silent (see README).
  expired = wait_until('stats-job timeouts reaches 1', 5) { (n = job.stats.timeouts) >= 1 && n }
  check('TTR expiry counted', 1, expired)
  other = waiter.value
  check('waiting second connection got it: body', 'g-ttr1', other.body)
  check('same job id', id, Integer(other.id))
  check_job('timed-out', other, state: 'reserved', reserves: 2, timeouts: 1)
  check('stats job-timeouts', 1, bc.stats.job_timeouts)
  check_raises('first connection deletes a job it lost', Beaneater::NotFoundError) { job.delete }
  check('owner deletes', 'DELETED', other.delete[:status])
end

def phase_touch(bc)
  step 'touch extends the TTR'
  gamma = bc.tubes['bq.gamma']
  put(gamma, 't-touch', ttr: 3)
  job = reserve_body('reserve ttr 3', gamma, 0, 't-touch')
  left = wait_until('time-left drops to <= 1', 5) { (tl = job.stats.time_left) <= 1 && tl }
  check('time-left before touch', 0..1, left)
  check('touch', 'TOUCHED', job.touch[:status])
  check_job('touched', job, state: 'reserved', time_left: 2..3, timeouts: 0)
  check('delete', 'DELETED', job.delete[:status])
end

def phase_pause(bc)
  step 'pause-tube'
  tube = bc.tubes['bq-paused']
  put(tube, 'p-1')
  start = monotonic
  check('pause-tube 2', 'PAUSED', tube.pause(2)[:status])
  check_tube(tube, pause: 2, pause_time_left: 0..2, cmd_pause_tube: 1, current_jobs_ready: 1)
  check_raises('reserve-with-timeout 0 on paused tube', Beaneater::TimedOutError) do
    tube.reserve(0)
  end
  job = reserve_body('reserve-with-timeout 10 returns after the pause', tube, 10, 'p-1')
  check('pause held the job for (s)', 1.5..10.0, (monotonic - start).round(2))
  check_tube(tube, pause: 0, pause_time_left: 0)
  check('delete', 'DELETED', job.delete[:status])
  check_raises('pause-tube unknown tube', Beaneater::NotFoundError) { bc.tubes['bq-nope'].pause(1) }
  check_raises('stats-tube unknown tube', Beaneater::NotFoundError) { bc.tubes['bq-nope'].stats }
end

def phase_watch_use(bc)
  step 'watch / ignore / use and their listings'
  bc.tubes.watch('bq-w1', 'bq-w2')
  check('list-tubes-watched', %w[bq-paused bq-w1 bq-w2], bc.tubes.watched.map(&:name).sort)
  bc.tubes.ignore('bq-paused', 'bq-w1')
  check('list-tubes-watched after ignore', ['bq-w2'], bc.tubes.watched.map(&:name))
  check_raises('ignore the last watched tube', Beaneater::NotIgnoredError) do
    bc.tubes.ignore('bq-w2')
  end
  bc.tubes.use('bq-u')
  check('list-tube-used', 'bq-u', bc.tubes.used.name)
  check_raises('use an invalid name', Beaneater::InvalidTubeName) { bc.tubes.use('-bad') }
  check('list-tube-used unchanged', 'bq-u', bc.tubes.used.name)
  check('list-tubes', %w[bq-u bq-w2 bq.gamma default], bc.tubes.all.map(&:name).sort)
end

# Raised by the worker-loop handler to ask Beaneater for a retry (release).
class RetryMe < StandardError; end

def phase_worker_loop(bc)
  step 'worker loop: Jobs#register + Jobs#process! (retry -> release, error -> bury)'
  tube = bc.tubes['bq-proc']
  retry_id = put(tube, 'retry-1', pri: 1)
  fail_id = put(tube, 'fail-1', pri: 2)
  put(tube, 'ok-1', pri: 3)
  seen = []
  bc.jobs.register('bq-proc', retry_on: [RetryMe], max_retries: 2) do |job|
    seen << job.body
    raise RetryMe if job.body.start_with?('retry')
    raise 'handler error' if job.body.start_with?('fail')
    bc.jobs.stop!
  end
  bc.jobs.process!(release_delay: 0)
  check('handler saw (pri order, 3 tries of retry-1)',
        %w[retry-1 retry-1 retry-1 fail-1 ok-1], seen)
  check_job('retried', bc.jobs.find(retry_id), state: 'buried', reserves: 3, releases: 2,
                                                 buries: 1, tube: 'bq-proc')
  check_job('failed', bc.jobs.find(fail_id), state: 'buried', reserves: 1, buries: 1)
  check_tube(tube, current_jobs_buried: 2, current_jobs_ready: 0, total_jobs: 3, cmd_delete: 1)
  [retry_id, fail_id].each do |id|
    check("delete buried #{id}", 'DELETED', bc.jobs.find(id).delete[:status])
  end
end

def phase_binary(bc)
  step 'binary bodies: all 256 byte values, empty, 65535 bytes; 65536 is JOB_TOO_BIG'
  tube = bc.tubes['bq-binary']
  bodies = [(0..255).to_a.pack('C*'), ''.b, Random.new(7).bytes(65_535)]
  bodies.each do |body|
    id = put(tube, body, ttr: 60)
    check("peek #{short_body(body)}", body.b, bc.jobs.find(id).body.b)
    job = reserve_body("reserve #{short_body(body)}", tube, 0, body)
    check_job('binary', job, state: 'reserved', tube: 'bq-binary')
    check('delete', 'DELETED', job.delete[:status])
  end
  check_raises('put 65536 bytes', Beaneater::JobTooBigError) { tube.put('x' * 65_536) }
  check_tube(tube, total_jobs: 3, current_jobs_ready: 0)
  check('connection usable after JOB_TOO_BIG', 'bq-binary', bc.tubes.used.name)
end

def produce(address, count)
  client = Beaneater.new(address)
  tube = client.tubes['bq-pc']
  count.times { |i| tube.put("pc-#{i}", pri: i % 7, ttr: 60) }
  client.close
  count
end

def consume(address, count)
  client = Beaneater.new(address)
  client.tubes.watch!('bq-pc')
  bodies = []
  count.times do
    job = client.tubes.reserve(10)
    bodies << job.body
    raise CheckFailed, "delete of #{job.id} failed" unless job.delete[:status] == 'DELETED'
  end
  client.close
  bodies
end

def phase_producer_consumer(bc, address)
  step "producer and consumer on two connections (threads), #{PC_JOBS} jobs"
  bc.tubes.watch('bq-pc') # keeps the tube (and its counters) alive after both clients close
  consumer = Thread.new { consume(address, PC_JOBS) }
  producer = Thread.new { produce(address, PC_JOBS) }
  check('producer put', PC_JOBS, producer.value)
  $puts_done += PC_JOBS
  bodies = consumer.value
  check('consumer got', PC_JOBS, bodies.size)
  check('no duplicates', PC_JOBS, bodies.uniq.size)
  check('no loss', (0...PC_JOBS).map { |i| "pc-#{i}" }.sort, bodies.sort)
  check_tube(bc.tubes['bq-pc'], total_jobs: PC_JOBS, cmd_delete: PC_JOBS, current_jobs_ready: 0,
                                current_jobs_reserved: 0)
  check_raises('tube empty afterwards', Beaneater::TimedOutError) { bc.tubes['bq-pc'].reserve(0) }
end

def phase_final(bc, pid)
  step 'final server stats'
  wait_until('current-connections back to 2', 5) { bc.stats.current_connections == 2 }
  check_server(bc, current_jobs_ready: 0, current_jobs_reserved: 0, current_jobs_delayed: 0,
                   current_jobs_buried: 0, total_jobs: $puts_done, current_connections: 2,
                   job_timeouts: 1, pid: pid)
  check('server still running', false, server_exited?(pid))
end

def run(binary)
  port = free_port
  pid = start_server(binary, port)
  wait_for_accept(pid, port)
  address = "127.0.0.1:#{port}"
  bc = Beaneater.new(address)
  bc2 = Beaneater.new(address)
  ids = {}
  phase_initial(bc, pid)
  phase_put(bc, ids)
  phase_peek(bc, ids)
  phase_reserve_delete(bc, ids)
  phase_bury_release(bc, ids)
  phase_kick(bc, ids)
  phase_drain_and_timeouts(bc)
  phase_ttr(bc, bc2)
  phase_touch(bc)
  phase_pause(bc)
  phase_watch_use(bc)
  phase_worker_loop(bc)
  phase_binary(bc)
  phase_producer_consumer(bc, address)
  phase_final(bc, pid)
ensure
  stop_server(pid)
end

def main
  abort("usage: #{$PROGRAM_NAME} SERVER_BINARY") unless ARGV.size == 1
  $stdout.sync = true
  Thread.abort_on_exception = false
  Thread.new do
    sleep WATCHDOG_SECONDS
    warn "FAIL [#{$step}]: run exceeded #{WATCHDOG_SECONDS} s (server hang?)"
    Process.kill('TERM', Process.pid)
  end
  run(ARGV[0])
  puts "PASS: beaneater #{Beaneater::VERSION}, #{$checks} checks against #{ARGV[0]}"
rescue CheckFailed, StandardError, SignalException => e
  warn "FAIL [#{$step}]: #{e.class}: #{e.message}"
  warn e.backtrace.first(3).map { |l| "    #{l}" }.join("\n") unless e.is_a?(CheckFailed)
  exit 1
end

main
