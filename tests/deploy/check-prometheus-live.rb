#!/usr/bin/env ruby
# frozen_string_literal: true
#
# deploy/monitoring against a real Prometheus: a local three-node cluster
# (tests/clients/local_cluster.rb: TLS, --failover=auto, -b, admin ports on
# loopback) scraped every second by Debian's prometheus, which loads
# beanstalkd-ha.rules.yml and evaluates it every second. Checked through
# Prometheus's HTTP API:
#
#   - every metric name that a dashboard panel, a dashboard variable or an
#     alert uses (beanstalkd_ha_*, process_*) has series: count(NAME);
#   - every expression of every panel of beanstalkd-ha.dashboard.json, with
#     the dashboard's variables substituted ($job and $instance by .+,
#     $__rate_interval by 10s), is valid and returns at least one series;
#   - each node's certificate expiry (deploy/mkcerts: 825 days) and binlog
#     filesystem figures are what they must be;
#   - every alerting rule was loaded and evaluates without an error;
#   - so that the check is shown able to fail: a copy of the dashboard with
#     one metric name misspelled (beanstalkd_ha_epoch -> beanstalkd_ha_epoc)
#     and a copy of the rules with one misspelled
#     (beanstalkd_ha_standby_connected -> beanstalkd_ha_standby_conected)
#     must each be reported, naming that metric and nothing else;
#   - kill -9 of a standby raises BeanstalkdHAStandbyDisconnected for it
#     and, as the nodes run with --sync-standbys 2, BeanstalkdHASyncDegraded
#     (state firing). The rules are loaded from a copy in which every `for:`
#     is 1s (the shipped durations are minutes; the expressions, labels and
#     annotations are the shipped ones).
#
# Every process (nodes, prometheus) is killed by pid at exit, on failure
# too (LocalCluster's at_exit and watchdog). No fixed sleeps: each wait has
# a deadline.
#
#   BQ_CTL=build/beanstalkctl BQ_MKCERTS=deploy/mkcerts BQ_SRC=. \
#     ruby tests/deploy/check-prometheus-live.rb build/beanstalkd-ha
# Without prometheus: exit 77 (skipped), or 1 under BQ_REQUIRE_ALL (CI
# installs the prometheus package: deploy/install-deps). BQ_PROMETHEUS
# names another binary.

require 'json'
require 'net/http'
require 'socket'
require 'uri'
require 'yaml'
require_relative '../clients/local_cluster'

$stdout.sync = true

WATCHDOG_SECONDS = 240
JOB = 'beanstalkd-ha'
# What the dashboard's variables stand for in the queries sent here.
VARIABLES = {
  '$__rate_interval' => '10s', '$__interval' => '1s', '$__range' => '1m',
  '${job}' => '.+', '$job' => '.+', '${instance}' => '.+', '$instance' => '.+'
}.freeze
METRIC = /\b(?:beanstalkd_ha_[a-z0-9_]+|process_[a-z_]+)\b/

server = ARGV[0]
ctl, mkcerts, src = ENV['BQ_CTL'], ENV['BQ_MKCERTS'], ENV['BQ_SRC']
fail!('usage: BQ_CTL=... BQ_MKCERTS=... BQ_SRC=... check-prometheus-live.rb SERVER') unless server && ctl && mkcerts && src
prometheus = ENV.fetch('BQ_PROMETHEUS', 'prometheus')
unless system(prometheus, '--version', out: File::NULL, err: File::NULL)
  if ENV.fetch('BQ_REQUIRE_ALL', '0') != '0'
    fail!("#{prometheus} is missing, and BQ_REQUIRE_ALL is set (deploy/install-deps installs it)")
  end
  warn "skipped: #{prometheus} is missing (apt-get install prometheus)"
  exit 77
end
monitoring = File.join(src, 'deploy/monitoring')
dashboard = JSON.parse(File.read(File.join(monitoring, 'beanstalkd-ha.dashboard.json')))
rules = YAML.safe_load(File.read(File.join(monitoring, 'beanstalkd-ha.rules.yml')))

# ---- what the dashboard and the rules ask of Prometheus ----

def substitute(expr)
  VARIABLES.reduce(expr) { |e, (var, value)| e.gsub(var, value) }
end

# [[where, expr]] of every panel target, nested rows' panels too.
def panel_queries(dash)
  panels = dash.fetch('panels').flat_map { |p| [p, *p.fetch('panels', [])] }
  panels.flat_map do |p|
    p.fetch('targets', []).map { |t| ["panel \"#{p['title']}\" #{t['refId']}", t.fetch('expr')] }
  end
end

# [[where, query]] of the dashboard's query variables.
def variable_queries(dash)
  dash.dig('templating', 'list').select { |v| v['type'] == 'query' }.map do |v|
    q = v['query']
    ["variable $#{v['name']}", q.is_a?(Hash) ? q.fetch('query') : q]
  end
end

# [[where, expr]] of every alerting rule.
def rule_exprs(doc)
  doc.fetch('groups').flat_map do |g|
    g.fetch('rules').select { |r| r['alert'] }.map { |r| ["alert #{r['alert']}", r.fetch('expr')] }
  end
end

# {metric name => [where it is used]}.
def metric_names(pairs)
  names = Hash.new { |h, k| h[k] = [] }
  pairs.each { |where, expr| expr.scan(METRIC).uniq.each { |n| names[n] << where } }
  names
end

# ---- Prometheus ----

def api(port, path, params = {})
  uri = URI("http://127.0.0.1:#{port}#{path}")
  uri.query = URI.encode_www_form(params) unless params.empty?
  res = Net::HTTP.get_response(uri)
  body = JSON.parse(res.body)
  [res.code.to_i, body]
rescue StandardError => e
  [0, { 'error' => e.message }]
end

# The series an instant query returns, or the error Prometheus gave.
def query(port, expr)
  code, body = api(port, '/api/v1/query', query: expr)
  return [nil, "HTTP #{code}: #{body['error']}"] unless code == 200 && body['status'] == 'success'
  [body.dig('data', 'result'), nil]
end

# The problems of a dashboard and a rules document against Prometheus now:
# one line each, naming the metric or the panel.
def problems(port, dash, rules_doc)
  out = []
  uses = metric_names(panel_queries(dash) + variable_queries(dash) + rule_exprs(rules_doc))
  uses.sort.each do |name, where|
    result, err = query(port, "count(#{name}{job=\"#{JOB}\"})")
    if err then out << "#{name}: #{err}"
    elsif result.empty? then out << "no series of #{name} (used by #{where.uniq.join(', ')})"
    end
  end
  panel_queries(dash).each do |where, expr|
    result, err = query(port, substitute(expr))
    if err then out << "#{where}: #{err} in #{expr}"
    elsif result.empty? then out << "#{where} returns no series: #{expr}"
    end
  end
  out
end

def active_alerts(port, name)
  code, body = api(port, '/api/v1/alerts')
  return [] unless code == 200
  body.dig('data', 'alerts').select { |a| a.dig('labels', 'alertname') == name }
end

# ---- the run ----

# Both standbys must acknowledge (--sync-standbys 2), so that losing one
# degrades sync and the sync alert fires too.
ENV['BQ_NODE_FLAGS'] = "#{ENV.fetch('BQ_NODE_FLAGS', '')} --sync-standbys 2"
cluster = LocalCluster.new(server, ctl, mkcerts, 'bq-prom', WATCHDOG_SECONDS)
work = cluster.work
nodes = cluster.nodes

# The rules with every `for:` at 1s: the faults below need not last minutes.
fast = YAML.safe_load(YAML.dump(rules))
fast['groups'].each { |g| g['rules'].each { |r| r['for'] = '1s' if r.key?('for') } }
File.write("#{work}/rules.yml", YAML.dump(fast))
prom_port = free_port
File.write("#{work}/prometheus.yml", YAML.dump(
  'global' => { 'scrape_interval' => '1s', 'scrape_timeout' => '1s', 'evaluation_interval' => '1s' },
  'rule_files' => ["#{work}/rules.yml"],
  'scrape_configs' => [{ 'job_name' => JOB, 'metrics_path' => '/metrics',
                         'static_configs' => [{ 'targets' => nodes.map { |n| "127.0.0.1:#{n[:admin]}" } }] }]
))
$step = 'promtool check config'
system('promtool', 'check', 'config', "#{work}/prometheus.yml", out: File::NULL) ||
  fail!("promtool check config #{work}/prometheus.yml failed")

$step = 'cluster start'
cluster.start_all
primary = wait_until('a settled primary with two standbys', 60) { cluster.settled }
puts "cluster: #{nodes.map { |n| "#{n[:name]} admin 127.0.0.1:#{n[:admin]}" }.join(', ')}; primary #{primary[:name]}"

# Some work, so that the counters move: a few puts, reserves and deletes.
$step = 'workload'
TCPSocket.open('127.0.0.1', primary[:client]) do |s|
  5.times do
    s.write("put 0 0 60 5\r\nhello\r\n")
    fail!("put: #{s.gets.inspect}") unless s.gets&.start_with?('INSERTED')
  end
  3.times do
    s.write("reserve-with-timeout 0\r\n")
    id = s.gets.to_s.split[1] || fail!('reserve failed')
    s.gets
    s.write("delete #{id}\r\n")
    fail!('delete failed') unless s.gets == "DELETED\r\n"
  end
end

$step = 'prometheus start'
cluster.own(Process.spawn(prometheus, "--config.file=#{work}/prometheus.yml",
                          "--storage.tsdb.path=#{work}/tsdb",
                          "--web.listen-address=127.0.0.1:#{prom_port}", '--log.level=warn',
                          in: File::NULL, out: ["#{work}/prometheus.log", 'a'],
                          err: ["#{work}/prometheus.log", 'a'], pgroup: true))
wait_until("prometheus ready on 127.0.0.1:#{prom_port} (#{work}/prometheus.log)", 60) do
  Net::HTTP.get_response(URI("http://127.0.0.1:#{prom_port}/-/ready")).code == '200'
rescue StandardError
  false
end
wait_until('every node scraped (up == 1)', 30) do
  r, = query(prom_port, "sum(up{job=\"#{JOB}\"})")
  r && !r.empty? && r[0]['value'][1] == '3'
end

$step = 'dashboard and alert metrics'
found = nil
begin
  wait_until('every metric, panel and alert metric to have series', 60) do
    found = problems(prom_port, dashboard, rules)
    found.empty?
  end
rescue SystemExit
  found.each { |p| warn "  missing: #{p}" }
  raise
end
names = metric_names(panel_queries(dashboard) + variable_queries(dashboard) + rule_exprs(rules))
puts "ok: #{names.size} metric names and #{panel_queries(dashboard).size} panel queries " \
     "(#{dashboard['panels'].count { |p| p['type'] != 'row' }} panels) return series"

# The new figures are the nodes' own: deploy/mkcerts signs for 825 days, and
# the binlog directories' filesystem is this machine's.
$step = 'certificate and disk figures'
r, = query(prom_port, "count((beanstalkd_ha_tls_certificate_expiry_timestamp_seconds - time()) / 86400 > 824 < 826)")
fail!("not every node's certificate expires in 825 days: #{r.inspect}") unless r && r[0] && r[0]['value'][1] == '3'
r, = query(prom_port, 'count(beanstalkd_ha_binlog_filesystem_avail_bytes <= beanstalkd_ha_binlog_filesystem_size_bytes ' \
                      'and beanstalkd_ha_binlog_filesystem_size_bytes > 0)')
fail!("the binlog filesystem figures are not sizes: #{r.inspect}") unless r && r[0] && r[0]['value'][1] == '3'
puts 'ok: every node exports its certificate (825 days left) and its binlog filesystem'

$step = 'rules loaded'
wait_until('every alerting rule loaded and evaluated without error', 30) do
  code, body = api(prom_port, '/api/v1/rules', type: 'alert')
  loaded = code == 200 ? body.dig('data', 'groups').flat_map { |g| g['rules'] } : []
  loaded.size == rule_exprs(rules).size && loaded.all? { |r| r['health'] == 'ok' }
end
puts "ok: #{rule_exprs(rules).size} alerting rules loaded, health ok"

# ---- the check can fail ----
$step = 'misspelled copies'
bad_dash = JSON.parse(JSON.dump(dashboard))
panel = bad_dash['panels'].find { |p| p.fetch('targets', []).any? { |t| t['expr'].include?('beanstalkd_ha_epoch{') } }
fail!('no panel shows beanstalkd_ha_epoch') unless panel
panel['targets'].each { |t| t['expr'] = t['expr'].gsub('beanstalkd_ha_epoch{', 'beanstalkd_ha_epoc{') }
bad = problems(prom_port, bad_dash, rules)
unless bad.any? { |p| p.include?('beanstalkd_ha_epoc ') } && bad.all? { |p| p.include?('beanstalkd_ha_epoc') }
  fail!("the misspelled dashboard was not reported as it must be: #{bad.inspect}")
end
puts "ok: a dashboard with beanstalkd_ha_epoc is reported: #{bad.first}"
bad_rules = YAML.safe_load(YAML.dump(rules))
rule = bad_rules['groups'][0]['rules'].find { |r| r['alert'] == 'BeanstalkdHAStandbyDisconnected' }
rule['expr'] = rule['expr'].sub('beanstalkd_ha_standby_connected', 'beanstalkd_ha_standby_conected')
bad = problems(prom_port, dashboard, bad_rules)
unless bad.size == 1 && bad[0].include?('beanstalkd_ha_standby_conected')
  fail!("the misspelled rules were not reported as they must be: #{bad.inspect}")
end
puts "ok: rules with beanstalkd_ha_standby_conected are reported: #{bad.first}"

$step = 'standby disconnected'
wait_until('no BeanstalkdHAStandbyDisconnected or SyncDegraded before the fault', 30) do
  active_alerts(prom_port, 'BeanstalkdHAStandbyDisconnected').empty? &&
    active_alerts(prom_port, 'BeanstalkdHASyncDegraded').empty? && cluster.settled
end
primary = cluster.settled
victim = nodes.find { |n| n != primary }
started = monotonic
cluster.kill(victim)
alert = wait_until("BeanstalkdHAStandbyDisconnected firing for #{victim[:name]}", 60) do
  active_alerts(prom_port, 'BeanstalkdHAStandbyDisconnected').find do |a|
    a['state'] == 'firing' && a.dig('labels', 'standby') == victim[:name]
  end
end
puts format('ok: kill -9 of standby %<n>s: %<a>s firing after %<t>.1f s: %<s>s',
            n: victim[:name], a: 'BeanstalkdHAStandbyDisconnected', t: monotonic - started,
            s: alert.dig('annotations', 'summary'))
sync = wait_until('BeanstalkdHASyncDegraded firing (--sync-standbys 2, one standby gone)', 60) do
  active_alerts(prom_port, 'BeanstalkdHASyncDegraded').find { |a| a['state'] == 'firing' }
end
puts format('ok: %<a>s firing after %<t>.1f s: %<s>s', a: 'BeanstalkdHASyncDegraded',
            t: monotonic - started, s: sync.dig('annotations', 'summary'))

puts 'check-prometheus-live: ok'
