# Sourced by the bench scripts: the apns-server config they run, one app ("staff")
# sending to a local apns-mock.
#   server_config PORT DATABASE MOCK_PORT [BATCH]
#     prints the YAML: listen on 127.0.0.1:PORT, store in DATABASE (sqlite:PATH or a
#     postgres:// URL), send to https://127.0.0.1:MOCK_PORT with the provider key of
#     gen-pki.sh's ids.env ($TOPIC, $KEY_ID, $TEAM_ID, sourced by the caller).
#     BATCH, when given, sets worker.batch_size; without it the server's default.
# Paths in it are relative to the folder the config is written to: api-keys,
# user-jwt.secret and pki/ (gen-pki.sh's output) must be there.
server_config() {
  local port=$1 database=$2 mock_port=$3 batch=${4:-}
  : "${TOPIC:?server_config: no TOPIC (source ids.env)}" "${KEY_ID:?server_config: no KEY_ID}" \
    "${TEAM_ID:?server_config: no TEAM_ID}"
  cat <<YAML
listen: 127.0.0.1:$port
database: $database
api_keys_file: api-keys
user_jwt_secret_file: user-jwt.secret
max_body_bytes: 1048576
log_level: warning
YAML
  [ -z "$batch" ] || printf 'worker:\n  batch_size: %s\n' "$batch"
  cat <<YAML
apps:
  - app_type: staff
    topic: $TOPIC
    key: pki/AuthKey_$KEY_ID.p8
    key_id: $KEY_ID
    team_id: $TEAM_ID
    production_endpoint: https://127.0.0.1:$mock_port
    cacert: pki/ca.pem
YAML
}
