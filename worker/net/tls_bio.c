/*
 * tls_bio.c: a socket BIO that reads ahead into a worker buffer (see
 * tls_bio.h).
 */
#include "worker/net/net.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/mem.h>

#include "worker/base/base.h"

/* A call for this many bytes or more is a record body BoringSSL wants
 * whole: reading it into BoringSSL's own buffer saves a copy, and at this
 * size one more read(2) per record is small beside the record's cost. */
#define TLS_BIO_DIRECT 4096

struct tls_bio {
	int fd;
	struct buf *in; /* read ahead, not yet given to BoringSSL; NULL if none */
};

static BIO_METHOD *tls_bio_method;

static int tls_bio_result(BIO *b, ssize_t n, int reading)
{
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		if (reading)
			BIO_set_retry_read(b);
		else
			BIO_set_retry_write(b);
	}
	return (int)n;
}

static int tls_bio_read(BIO *b, char *out, int len)
{
	struct tls_bio *s = BIO_get_data(b);
	struct buf *in = s->in;
	uint32_t take;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (!in) {
		ssize_t n;

		/* no buffer to spare: read what was asked, as a plain BIO */
		if (len >= TLS_BIO_DIRECT || !(in = buf_get()))
			return tls_bio_result(b, read(s->fd, out, (size_t)len), 1);
		n = read(s->fd, in->data, in->cap);
		if (n <= 0) {
			buf_put(in);
			return tls_bio_result(b, n, 1);
		}
		in->end = (uint32_t)n;
		s->in = in;
	}
	take = buf_len(in) < (uint32_t)len ? buf_len(in) : (uint32_t)len;
	memcpy(out, in->data + in->start, take);
	in->start += take;
	if (in->start == in->end) {
		buf_put(in);
		s->in = NULL;
	}
	return (int)take;
}

static int tls_bio_write(BIO *b, const char *p, int len)
{
	struct tls_bio *s = BIO_get_data(b);

	BIO_clear_retry_flags(b);
	return tls_bio_result(b, write(s->fd, p, (size_t)len), 0);
}

static long tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls_bio *s = BIO_get_data(b);
	(void)num;

	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_CTRL_PENDING:
		return s && s->in ? (long)buf_len(s->in) : 0;
	case BIO_C_GET_FD:
		if (!s)
			return -1;
		if (ptr)
			*(int *)ptr = s->fd;
		return s->fd;
	default:
		return 0;
	}
}

static int tls_bio_destroy(BIO *b)
{
	struct tls_bio *s = BIO_get_data(b);

	if (!s)
		return 1;
	/* the socket is the connection's to close */
	if (s->in)
		buf_put(s->in);
	OPENSSL_free(s);
	BIO_set_data(b, NULL);
	return 1;
}

int tls_bio_init(void)
{
	if (tls_bio_method)
		return 0;
	tls_bio_method = BIO_meth_new(BIO_TYPE_SOCKET, "weir socket");
	if (!tls_bio_method || !BIO_meth_set_read(tls_bio_method, tls_bio_read) ||
	    !BIO_meth_set_write(tls_bio_method, tls_bio_write) || !BIO_meth_set_ctrl(tls_bio_method, tls_bio_ctrl) ||
	    !BIO_meth_set_destroy(tls_bio_method, tls_bio_destroy)) {
		tls_bio_cleanup();
		return -1;
	}
	return 0;
}

void tls_bio_cleanup(void)
{
	BIO_meth_free(tls_bio_method);
	tls_bio_method = NULL;
}

int tls_bio_attach(SSL *ssl, int fd)
{
	BIO *b = BIO_new(tls_bio_method);
	struct tls_bio *s = OPENSSL_malloc(sizeof(*s));

	if (!b || !s) {
		BIO_free(b);
		OPENSSL_free(s);
		return -1;
	}
	s->fd = fd;
	s->in = NULL;
	BIO_set_data(b, s);
	BIO_set_init(b, 1);
	/* one BIO both ways: SSL_set_bio takes the single reference */
	SSL_set_bio(ssl, b, b);
	return 0;
}

int tls_bio_pending(const SSL *ssl)
{
	const struct tls_bio *s = BIO_get_data(SSL_get_rbio(ssl));

	return SSL_has_pending(ssl) || (s && s->in);
}
