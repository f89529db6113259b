# frozen_string_literal: true
#
# free_port for the Ruby tests: a free loopback port below the kernel's
# ephemeral range, at random, as tests/support's bqt_free_port picks them.
# A port bind(0) gave could be taken as another process's outgoing
# connection's local port before a server binds it ('bind failed ...
# Address already in use'). Never the same port twice in one run.

require 'socket'

def free_port
  lo = 10_000
  hi = (Integer(File.read('/proc/sys/net/ipv4/ip_local_port_range').split[0]) rescue 32_768) - 1
  $ports_given ||= {}
  200.times do
    port = hi - lo >= 2000 ? rand(lo..hi) : 0
    next if $ports_given[port]

    s = TCPServer.new('127.0.0.1', port)
    port = s.addr[1]
    s.close
    $ports_given[port] = true
    return port
  rescue SystemCallError
    next
  end
  raise 'no free loopback port'
end
