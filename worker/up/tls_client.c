/*
 * tls_client.c: contexts, handshakes and session reuse towards upstream
 * servers (see tls_client.h).
 */
#include "worker/up/up.h"

#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "common/tlscert.h"
#include "worker/net/net.h"
#include "worker/base/base.h"

static struct {
	SSL_CTX *ctx[CONFIG_MAX_UPSTREAMS]; /* by config upstream index */
	const struct config *cfg;
	/* belongs to the table wk.table_id names (tls_client_sync) */
	SSL_CTX *by_group[CONFIG_MAX_UPSTREAMS]; /* by table upstream index */
} tc;

/* BoringSSL hands us each session (a TLS 1.3 ticket arrives after the
 * handshake, during SSL_read): we keep the newest in the server's state
 * (by identity, so it survives a reload that keeps the server) with the
 * context it came from, and take ownership (return 1). */
static int tls_client_new_session(SSL *ssl, SSL_SESSION *s)
{
	struct upconn *u = SSL_get_app_data(ssl);
	struct up_server *srv = u ? u->srv : NULL;

	if (!srv || srv == &wk.servers[UPSTREAM_STATE_OVERFLOW] || !SSL_SESSION_is_resumable(s))
		return 0;
	if (srv->session)
		SSL_SESSION_free(srv->session);
	srv->session = s;
	srv->session_ctx = SSL_get_SSL_CTX(ssl);
	return 1;
}

static SSL_CTX *tls_client_ctx_new(const struct config_upstream *cu)
{
	static const uint8_t alpn[] = "\x08http/1.1", alpn_h2[] = "\x02h2";
	SSL_CTX *ctx = tls_ctx_base();

	if (!ctx)
		return NULL;
	/* protocol = "h2": only h2 offered; a server that picks nothing is
	 * refused after the handshake (h2_client.c) */
	if ((cu->protocol == 2 ? SSL_CTX_set_alpn_protos(ctx, alpn_h2, sizeof(alpn_h2) - 1)
	                       : SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1)) != 0 /* 0 is success here */)
		goto fail;
	if (cu->tls_verify) {
		X509_VERIFY_PARAM *p = SSL_CTX_get0_param(ctx);

		if (!SSL_CTX_set1_verify_cert_store(ctx, cu->tls_store) ||
		    !X509_VERIFY_PARAM_set1_host(p, cu->tls_sni, strlen(cu->tls_sni)))
			goto fail;
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	/* sessions go to our per-server slot, not to a cache of BoringSSL's */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
	SSL_CTX_sess_set_new_cb(ctx, tls_client_new_session);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

int tls_client_init(const struct config *cfg)
{
	tc.cfg = cfg;
	for (int i = 0; i < cfg->nupstreams; i++) {
		const struct config_upstream *cu = &cfg->upstreams[i];

		if (!cu->tls)
			continue;
		tc.ctx[i] = tls_client_ctx_new(cu);
		if (!tc.ctx[i]) {
			log_error("TLS to upstream %s: %s", cu->name, tlscert_reason("unknown error"));
			return -1;
		}
		if (!cu->tls_verify && wk.index == 0)
			log_warn("upstream %s: TLS certificates are not verified (tls.verify = false)", cu->name);
	}
	return 0;
}

void tls_client_cleanup(void)
{
	upstream_free_states(); /* they hold the sessions */
	for (int i = 0; i < CONFIG_MAX_UPSTREAMS; i++) {
		SSL_CTX_free(tc.ctx[i]);
		tc.ctx[i] = NULL;
	}
}

/* Our context for group <ug> of a table: the one built from the config
 * group of the same name and the same TLS settings (CA file and what it
 * held included), or NULL when this worker's config has none (the table is
 * from a reload newer or older than us). */
static SSL_CTX *tls_client_match(const struct route_upstream *ug)
{
	const struct config *cfg = tc.cfg;

	if (!cfg || !ug->tls)
		return NULL;
	for (int i = 0; i < cfg->nupstreams; i++) {
		const struct config_upstream *cu = &cfg->upstreams[i];

		if (cu->tls && strcmp(cu->name, ug->name) == 0 && cu->tls_verify == ug->tls_verify &&
		    strcmp(cu->tls_sni, ug->tls_sni) == 0 && strcmp(cu->tls_ca, ug->tls_ca) == 0 &&
		    cu->tls_ca_sum == ug->tls_ca_sum && cu->protocol == ug->protocol)
			return tc.ctx[i];
	}
	return NULL;
}

void tls_client_sync(const struct route_table *t)
{
	memset(tc.by_group, 0, sizeof(tc.by_group));
	for (uint32_t i = 0; i < t->nupstreams; i++)
		tc.by_group[i] = tls_client_match(&route_upstreams(t)[i]);
	/* a pooled connection made under other TLS settings (another CA,
	 * name or verify, or TLS turned on or off for its group) is not the
	 * new table's to reuse: its handshake trusted what the table no
	 * longer says */
	for (uint32_t i = 0; i < t->nservers; i++) {
		SSL_CTX *want = tc.by_group[route_servers(t)[i].upstream];
		struct upconn *u = upstream_state(t, i)->idle, *next;

		for (; u; u = next) {
			next = u->next;
			if ((u->ssl ? SSL_get_SSL_CTX(u->ssl) : NULL) != want)
				upstream_close(u);
		}
	}
}

int tls_client_attach(struct upconn *u, const struct route_table *t, uint32_t server, const char **why)
{
	uint32_t g = route_servers(t)[server].upstream;
	const struct route_upstream *ug = &route_upstreams(t)[g];
	SSL_CTX *ctx = t->id == wk.table_id ? tc.by_group[g] : tls_client_match(ug);
	SSL *ssl;

	if (!ctx) {
		*why = "this worker started before the reload that set up TLS for this group";
		return WEIR_ERR(UPSTREAM_TLS);
	}
	ssl = SSL_new(ctx);
	if (!ssl || tls_bio_attach(ssl, u->io.fd) < 0 || (ug->tls_sni[0] && !SSL_set_tlsext_host_name(ssl, ug->tls_sni))) {
		SSL_free(ssl);
		ERR_clear_error();
		*why = "out of memory";
		return WEIR_ERR(NOMEM);
	}
	SSL_set_connect_state(ssl);
	SSL_set_app_data(ssl, u);
	/* a session is offered only through the context that made it: a group
	 * whose TLS settings changed in a reload starts anew */
	if (u->srv->session && u->srv->session_ctx == ctx)
		SSL_set_session(ssl, u->srv->session); /* takes its own reference */
	u->ssl = ssl;
	return 0;
}

int tls_client_handshake(struct upconn *u, int *events, const char **why)
{
	int rc, err;
	long v;

	errno = 0;
	rc = SSL_do_handshake(u->ssl);
	if (rc == 1) {
		SHM_ADD(wk.cnt, upstream_tls_handshakes, 1);
		if (SSL_session_reused(u->ssl))
			SHM_ADD(wk.cnt, upstream_tls_resumed, 1);
		return 0;
	}
	err = SSL_get_error(u->ssl, rc);
	*events = tls_want_events(err);
	if (*events)
		return WEIR_EAGAIN;
	switch (err) {
	case SSL_ERROR_SSL:
		/* the verify result means something only when verification ran
		 * and failed; before that BoringSSL reports an "invalid call" */
		v = SSL_get_verify_result(u->ssl);
		if (ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_CERTIFICATE_VERIFY_FAILED && v != X509_V_OK)
			*why = X509_verify_cert_error_string(v);
		else
			*why = tlscert_reason("unknown error");
		break;
	case SSL_ERROR_SYSCALL:
	case SSL_ERROR_ZERO_RETURN:
		*why = errno ? strerror(errno) : "the server closed the connection";
		break;
	default:
		*why = "unexpected SSL_get_error";
		break;
	}
	ERR_clear_error();
	return WEIR_ERR(UPSTREAM_TLS);
}

ssize_t tls_client_recv(struct upconn *u, void *p, size_t n)
{
	int rc;

	/* SSL_ERROR_SYSCALL below tells the end of the stream by errno 0 */
	errno = 0;
	rc = SSL_read(u->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
	u->tls_wants = 0;
	if (rc > 0)
		return rc;
	switch (SSL_get_error(u->ssl, rc)) {
	case SSL_ERROR_WANT_READ:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		u->tls_wants = EV_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0; /* close_notify */
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (errno == 0 || errno == EPIPE)
			return 0; /* the end of the stream without close_notify */
		return -1;
	default:
		ERR_clear_error();
		errno = ECONNRESET;
		return -1;
	}
}

ssize_t tls_client_sendv(struct upconn *u, const struct iovec *iov, int cnt)
{
	int rc;
	ssize_t n = tls_write(u->ssl, iov, cnt, &rc);

	if (n != 0)
		return n;
	switch (SSL_get_error(u->ssl, rc)) {
	case SSL_ERROR_WANT_WRITE:
	case SSL_ERROR_WANT_READ: /* only with renegotiation, which BoringSSL refuses */
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (errno == 0)
			errno = EPIPE;
		return -1;
	default:
		ERR_clear_error();
		errno = EPIPE;
		return -1;
	}
}

void tls_client_close(struct upconn *u)
{
	tls_ssl_close(u->ssl);
	u->ssl = NULL;
}
