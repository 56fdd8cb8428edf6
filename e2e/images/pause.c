/* The e2e cluster's pod sandbox: holds the pod's namespaces, reaps what is re-parented to it,
 * and exits on SIGINT or SIGTERM. Nothing can be pulled on the machines the e2e cluster runs
 * on, so the sandbox image is built from this file (e2e/cluster.sh). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigemptyset(&on_stop.sa_mask);
    sigemptyset(&on_child.sa_mask);
    if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
        sigaction(SIGCHLD, &on_child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
