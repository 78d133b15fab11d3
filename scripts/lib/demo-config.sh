# Sourced by demo-server.sh and check-demo-config.sh: the example config
# (examples/server/apns-server.yaml) pointed at a local apns-mock and the throw-away
# keys of scripts/gen-pki.sh. Every app's commented mock lines are switched on, so each
# app sends to loopback only, never to Apple (check-demo-config.sh proves it).
#   demo_config EXAMPLE MOCK_PORT CA_PEM KEY_ID TEAM_ID TOPIC    prints the YAML
# Also: every topic becomes TOPIC (the one the mock accepts), the log quieter, and the
# ops app's 60 s batching window 3 s, so that the demo shows it closing.
demo_config() {
  local example=$1 ca=$3 key_id=$4 team_id=$5 topic=$6 mock=https://127.0.0.1:$2
  sed -e "s/AuthKey_ABC123DEFG.p8/AuthKey_$key_id.p8/; s/key_id: ABC123DEFG/key_id: $key_id/; s/team_id: DEF123GHIJ/team_id: $team_id/" \
      -e "s|# sandbox_endpoint: .*|sandbox_endpoint: $mock|" \
      -e "s|# production_endpoint: .*|production_endpoint: $mock|" \
      -e "s|# broadcast_management_endpoint: .*|broadcast_management_endpoint: $mock|" \
      -e "s|# broadcast_sandbox_management_endpoint: .*|broadcast_sandbox_management_endpoint: $mock|" \
      -e "s|# cacert: .*|cacert: $ca|" \
      -e "s/log_level: info/log_level: warning/" \
      -e "s/topic: .*/topic: $topic/" -e "s/window_seconds: 60/window_seconds: 3/" \
      "$example"
}
