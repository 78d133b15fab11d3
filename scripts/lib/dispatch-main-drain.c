/* Preloaded under valgrind only (scripts/callgrind-*.sh): valgrind 3.19 stops once
 * libdispatch's dispatch_main() parks the main thread in pthread_exit, so this
 * dispatch_main() drains the main queue on the main thread instead, as
 * CoreFoundation's run loop does. */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <unistd.h>
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *msg);
void dispatch_main(void)
{
    int fd = _dispatch_get_main_queue_handle_4CF();
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        uint64_t v;
        (void)!read(fd, &v, sizeof v);
        _dispatch_main_queue_callback_4CF(NULL);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, -1);
    }
}
