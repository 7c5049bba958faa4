/* proxy_hdr.c: see proxy_hdr.h. */
#include "common/proxy_hdr.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

const uint8_t proxy_hdr_v2_sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

size_t proxy_hdr_local(int version, uint8_t out[PROXY_HDR_LOCAL_MAX])
{
	if (version == 1) {
		memcpy(out, "PROXY UNKNOWN\r\n", 15);
		return 15;
	}
	memcpy(out, proxy_hdr_v2_sig, 12);
	out[12] = 0x20; /* version 2, LOCAL */
	out[13] = 0x00; /* UNSPEC */
	out[14] = out[15] = 0;
	return 16;
}

int proxy_hdr_send(int fd, const void *h, size_t n)
{
	ssize_t w;

	do
		w = send(fd, h, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)n ? 0 : -1;
}
