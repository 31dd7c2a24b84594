// Test support: a command in a network namespace of its own, whose loopback interface is up and
// also carries a non-loopback address, so a test can connect from an address that is not loopback
// on any machine (CI's has no external interface) without touching the machine's own network.
// The runtime has no iproute2: the interface is set up with the classic ifconfig ioctls from
// python3 (an alias `lo:1` for the address), the namespace made by util-linux's `unshare --net`.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

/** Brings `lo` up and puts sys.argv[1] on it as `lo:1` (SIOCGIFFLAGS/SIOCSIFFLAGS, SIOCSIFADDR). */
const SETUP = `
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack('16sH', fcntl.ioctl(s, 0x8913, struct.pack('16sH14x', b'lo', 0))[:18])[1]
fcntl.ioctl(s, 0x8914, struct.pack('16sH14x', b'lo', flags | 1))
fcntl.ioctl(s, 0x8916, struct.pack('16sH2s4s8x', b'lo:1', socket.AF_INET, b'', socket.inet_aton(sys.argv[1])))
`;

/** Runs `command args` in a new network namespace where `address` (IPv4) is a local, non-loopback address. */
export function spawnInNetns(address: string, command: string, args: string[], o: SpawnOptions = {}): ChildProcess {
  const script = 'python3 -c "$0" "$1" && shift && exec "$@"';
  return spawn('unshare', ['--net', 'sh', '-c', script, SETUP, address, command, ...args], o);
}
