/* cmd/check-az/peers.c - TCP connect round-trip times to peers: a weak hint, never a verdict */

/*
 * A TCP handshake to a peer takes one network round trip: tens of
 * microseconds inside an AZ, around a millisecond or more between AZs. But a
 * busy host, a firewall or a far port skews it, so the tool reports it next
 * to the AZ IDs and never lets it decide.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "check-az.h"
#include "clock/clock.h"
#include "common/tool.h"

#define TRIES 3

/* One connect within timeout_s: its duration, or -1 with err. */
static double connect_once(const struct addrinfo *a, double timeout_s, char *err, size_t errlen)
{
	int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	double t0 = (sd_now_s() * 1e6), rtt = -1;
	int rc = connect(fd, a->ai_addr, a->ai_addrlen);
	if (rc < 0 && errno != EINPROGRESS) {
		snprintf(err, errlen, "connect: %s", strerror(errno));
		goto out;
	}
	if (rc < 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		double deadline = t0 + timeout_s * 1e6;
		for (;;) {
			int left_ms = (int)((deadline - (sd_now_s() * 1e6)) / 1000) + 1;
			if (left_ms <= 0) {
				snprintf(err, errlen, "no answer within %g s", timeout_s);
				goto out;
			}
			rc = poll(&p, 1, left_ms);
			if (rc > 0)
				break;
			if (rc < 0 && errno != EINTR) {
				snprintf(err, errlen, "poll: %s", strerror(errno));
				goto out;
			}
		}
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			snprintf(err, errlen, "connect: %s", strerror(soerr));
			goto out;
		}
	}
	rtt = (sd_now_s() * 1e6) - t0;
out:
	close(fd);
	return rtt;
}

int peer_rtt(const char *spec, double timeout_s, double *rtt_us, char *err, size_t errlen)
{
	char host[256], port[16] = "22";
	const char *colon;
	*rtt_us = -1;
	if (spec[0] == '[') {
		const char *e = strchr(spec, ']');
		if (!e || (size_t)(e - spec) >= sizeof host || (e[1] && e[1] != ':')) {
			snprintf(err, errlen, "'%s': expected HOST, HOST:PORT or [IPV6]:PORT", spec);
			return -1;
		}
		snprintf(host, sizeof host, "%.*s", (int)(e - spec - 1), spec + 1);
		colon = e[1] ? e + 1 : NULL;
	} else {
		colon = strchr(spec, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL;   /* a bare IPv6 address */
		size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
		if (n >= sizeof host) {
			snprintf(err, errlen, "'%s': host name too long", spec);
			return -1;
		}
		snprintf(host, sizeof host, "%.*s", (int)n, spec);
	}
	long p;
	if (colon) {
		if (tool_parse_long(colon + 1, 1, 65535, &p) < 0) {
			snprintf(err, errlen, "'%s': the port must be 1 to 65535", spec);
			return -1;
		}
		snprintf(port, sizeof port, "%ld", p);
	}
	if (!host[0]) {
		snprintf(err, errlen, "'%s': no host", spec);
		return -1;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
		return -1;
	}
	double best = -1;
	for (int i = 0; i < TRIES; i++) {
		double t = connect_once(res, timeout_s, err, errlen);
		if (t < 0)
			break;
		if (best < 0 || t < best)
			best = t;
	}
	freeaddrinfo(res);
	if (best < 0)
		return -1;
	*rtt_us = best;
	return 0;
}
