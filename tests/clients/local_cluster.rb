# frozen_string_literal: true
#
# A local three-node beanstalkd-ha cluster for the Ruby cluster tests
# (tests/clients/beaneater_failover.rb, tests/lb/haproxy_failover.rb):
# certificates by deploy/mkcerts, nodes on free loopback ports with
# --failover=auto, TLS and -f 0, each logging to WORK/NAME.log; helpers to
# wait with a deadline, read a node's /status, find the settled primary,
# kill -9 and start nodes, and run beanstalkctl. Every node is killed at
# exit; the work directory is removed when the test passed. BQ_NODE_FLAGS
# adds flags to every node (e.g. -V to debug).

require 'fileutils'
require 'json'
require 'net/http'
require 'socket'
require 'tmpdir'
require_relative 'free_port'

$step = 'startup'

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
    sleep 0.02
  end
  v
end

# Waits until the count the block gives (read under lock) has grown by more.
def wait_grown(lock, more, what, &count)
  target = lock.synchronize(&count) + more
  wait_until("#{more} more #{what}", 60) { lock.synchronize(&count) >= target }
end

# The cluster: nodes (name, client, repl, admin ports), their pids, certs.
class LocalCluster
  attr_reader :nodes, :certs, :work, :pids

  # witness: n3 is a witness (votes, stores no jobs, takes no clients here).
  def initialize(server, ctl, mkcerts, prefix, watchdog_seconds, witness: false)
    @server = server
    @witness = witness
    @ctl = ctl
    @work = Dir.mktmpdir(prefix)
    @certs = "#{@work}/certs"
    system(mkcerts, @certs, 'n1', 'n2', 'n3', 'beanstalkctl', out: File::NULL, err: File::NULL) ||
      fail!('deploy/mkcerts failed')
    @nodes = (1..3).map { |i| { name: "n#{i}", client: free_port, repl: free_port, admin: free_port } }
    @pids = {}
    @extra = []
    at_exit { finish }
    watchdog(watchdog_seconds)
  end

  # Processes killed with the cluster at exit (e.g. a load balancer).
  def own(pid)
    @extra << pid
  end

  def witness?(n)
    @witness && n[:name] == 'n3'
  end

  # The nodes that hold jobs.
  def data_nodes
    @nodes.reject { |n| witness?(n) }
  end

  def start(n)
    FileUtils.mkdir_p("#{@work}/#{n[:name]}")
    peers = @nodes.flat_map { |p| ['--peer', "#{p[:name]}=127.0.0.1:#{p[:repl]}"] }
    role = if witness?(n) then ['--role=witness']
           elsif @witness then ['--role=standby', '--witness', 'n3']
           else ['--role=standby']
           end
    @pids[n[:name]] = Process.spawn(
      @server, '-l', '127.0.0.1', '-p', n[:client].to_s, '-b', "#{@work}/#{n[:name]}", '-f', '0',
      '--node-id', n[:name], *peers, *role, '--failover=auto',
      '--admin-listen', "127.0.0.1:#{n[:admin]}", '--status-interval', '0',
      '--tls-cert', "#{@certs}/#{n[:name]}.pem", '--tls-key', "#{@certs}/#{n[:name]}.key",
      '--tls-ca', "#{@certs}/ca.pem", *ENV.fetch('BQ_NODE_FLAGS', '').split,
      in: File::NULL, err: ["#{@work}/#{n[:name]}.log", 'a'],
      pgroup: true
    )
  end

  def start_all
    @nodes.each { |n| start(n) }
  end

  def kill(n)
    Process.kill('KILL', @pids[n[:name]])
    Process.waitpid(@pids.delete(n[:name]))
  end

  def status(n)
    JSON.parse(Net::HTTP.get(URI("http://127.0.0.1:#{n[:admin]}/status")))
  rescue StandardError
    nil
  end

  # The primary with every other live node streaming from it, a witness
  # connected (or nil).
  def settled
    live = @nodes.count { |n| @pids.key?(n[:name]) }
    @nodes.each do |n|
      next unless @pids.key?(n[:name])
      st = status(n)
      next unless st && st['role'] == 'primary'
      streaming = st['standbys'].count { |s| %w[streaming witness].include?(s['state']) }
      return n if streaming == live - 1
    end
    nil
  end

  # Runs beanstalkctl against node n with the operator's certificate.
  def ctl(n, *args)
    system(@ctl, '--nodes', "#{n[:name]}=127.0.0.1:#{n[:admin]}",
           '--tls-cert', "#{@certs}/beanstalkctl.pem", '--tls-key', "#{@certs}/beanstalkctl.key",
           '--tls-ca', "#{@certs}/ca.pem", *args, out: File::NULL)
  end

  private

  def finish
    (@pids.values + @extra).each { |pid| Process.kill('KILL', pid) rescue nil }
    (@pids.values + @extra).each { |pid| Process.waitpid(pid) rescue nil }
    ok = $!.nil? || ($!.is_a?(SystemExit) && $!.success?)
    ok ? FileUtils.rm_rf(@work) : warn("work directory kept: #{@work}")
  end

  def watchdog(seconds)
    Thread.new do
      sleep seconds
      warn "FAIL [#{$step}]: the whole run took more than #{seconds} s"
      (@pids.values + @extra).each { |pid| Process.kill('KILL', pid) rescue nil }
      exit! 1
    end
  end
end
