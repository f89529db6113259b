# frozen_string_literal: true
#
# Counts the connections Beaneater makes (its own reconnects and the
# test's): CountConnects.count, for the Ruby cluster tests
# (tests/clients/beaneater_failover.rb, tests/lb/haproxy_failover.rb).

require 'beaneater'

# Wraps Beaneater::Connection#establish_connection with a counter.
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
