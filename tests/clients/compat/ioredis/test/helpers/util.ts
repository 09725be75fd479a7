import Redis from "../../lib/Redis";
import { RedisOptions } from "../../lib/redis/RedisOptions";

export function toRecord(entry: unknown[]): Record<string, unknown> {
  const record: Record<string, unknown> = {};
  for (let index = 0; index < entry.length; index += 2) {
    record[String(entry[index])] = entry[index + 1];
  }

  return record;
}

type StreamEntry = [id: string, fields: string[] | null];
type StreamReadReply =
  | [key: string, entries: StreamEntry[]][]
  | Record<string, StreamEntry[]>
  | null;

export function countStreamEntries(reply: StreamReadReply): number {
  if (reply === null) {
    return 0;
  }

  if (Array.isArray(reply)) {
    return reply.reduce((total, [, entries]) => total + entries.length, 0);
  }

  return Object.values(reply).reduce(
    (total, entries) => total + entries.length,
    0
  );
}

export function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}

export function waitForMonitorReady() {
  // It takes a while for the monitor to be ready.
  // This is a hack to wait for it because the monitor command
  // does not have a response
  return sleep(150);
}

function parseRedisVersion(version: string): number[] {
  return version.match(/\d+/g)?.slice(0, 2).map(Number) ?? [0, 0];
}

function compareRedisVersions(left: string, right: string): number {
  const leftParts = parseRedisVersion(left);
  const rightParts = parseRedisVersion(right);
  const length = Math.max(leftParts.length, rightParts.length);

  for (let index = 0; index < length; index++) {
    const difference = (leftParts[index] ?? 0) - (rightParts[index] ?? 0);
    if (difference !== 0) {
      return difference;
    }
  }

  return 0;
}

export async function isRedisVersionLowerThan(
  minimumVersion: string,
  options?: RedisOptions
): Promise<boolean> {
  const redis = new Redis(options);

  try {
    const info = await redis.info("server");
    const version = info.match(/^redis_version:(.+)$/m)?.[1]?.trim();

    if (!version) {
      throw new Error(
        "Could not determine redis_version from INFO server response"
      );
    }

    return compareRedisVersions(version, minimumVersion) < 0;
  } finally {
    redis.disconnect();
  }
}

export async function getCommandsFromMonitor(
  redis: any,
  count: number,
  exec: Function
): Promise<[any]> {
  const arr: string[] = [];
  const monitor = await redis.monitor();
  await waitForMonitorReady();
  const promise = new Promise((resolve, reject) => {
    setTimeout(reject, 1000, new Error("Monitor timed out"));
    monitor.on("monitor", (_, command) => {
      if (arr.length !== count) {
        arr.push(command);
      }
      if (arr.length === count) {
        resolve(arr);
        monitor.disconnect();
      }
    });
  });

  const [commands] = await Promise.all<[any]>([promise, exec()]);
  return commands;
}
