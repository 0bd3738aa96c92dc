/* net-int.h - what net.c and net-setup.c share, private to them. */
#ifndef SD_TRANSPORT_NET_NET_INT_H
#define SD_TRANSPORT_NET_NET_INT_H

#include "transport/net/xfer.h"

/* Between waits: dead ranks (the bootstrap), abort notices, cancels. */
int sd_net_check_news(struct smddp_comm *c);

#endif
