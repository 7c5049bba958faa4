# peerconf.sh: the nginx and HAProxy configurations that slow.sh, ws.sh
# and cpusplit.sh run beside weir, sourced by them (". tests/bench/peerconf.sh"),
# so that the peers weir is measured against are set up alike everywhere:
# one worker or thread each, in the foreground, no access log, 127.0.0.1.

# bench_nginx FILE DIR NAME HTTP: an nginx with its error log and pid in
# DIR/NAME.err and DIR/NAME.pid; HTTP is what its http block holds besides
# the shared lines.
bench_nginx() {
	cat >"$1" <<EOF
worker_processes 1; daemon off; master_process off;
error_log $2/$3.err; pid $2/$3.pid;
events { worker_connections 8192; }
http { access_log off; keepalive_requests 100000000;
$4 }
EOF
}

# bench_nginx_origin FILE DIR PORT [LOCATIONS [HTTP]]: the origin nginx,
# "hello from origin" at every path but those LOCATIONS (nginx location
# blocks) serve; HTTP: more lines for its http block.
bench_nginx_origin() {
	bench_nginx "$1" "$2" origin "${5:+  $5
}  server { listen 127.0.0.1:$3 reuseport;${4:+ $4}
    location / { return 200 \"hello from origin\\n\"; } }"
}

# bench_nginx_proxy FILE DIR LISTEN ORIGIN_PORT: nginx as the proxy, on
# LISTEN (an nginx listen argument: "127.0.0.1:18081 ssl; ssl_..." works),
# with 256 kept-alive connections to the origin.
bench_nginx_proxy() {
	bench_nginx "$1" "$2" nginx "  upstream origin { server 127.0.0.1:$4; keepalive 256; keepalive_requests 100000000; }
  server { listen $3;
    location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
}

# bench_haproxy FILE MAXCONN BIND SERVER [DEFAULTS [BACKEND]]: HAProxy in
# HTTP mode, one thread, binding BIND (a bind argument) and sending to the
# one server SERVER (address:port); DEFAULTS and BACKEND are more lines,
# indented, for those sections.
bench_haproxy() {
	cat >"$1" <<EOF
global
  nbthread 1
  maxconn $2
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
${5:+$5
}frontend fe
  bind $3
  default_backend be
backend be
${6:+$6
}  server s1 $4
EOF
}
