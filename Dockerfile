# speech-gateway image. Two stages on the same Node 24 LTS / Debian 13 base (the uWS binary needs
# glibc 2.38 or newer; the Opus addon is built against this Node and this C library): the build
# stage compiles TypeScript and the Opus addon, the runtime stage gets only the compiled output and
# the production node_modules. test/ship/docker-recipe.test.ts runs these RUN lines, COPY lines and
# the ENTRYPOINT/CMD on the test runtime, the same Debian 13 and Node 24: keep each RUN on one line.

FROM node:24-trixie-slim AS build
# @discordjs/opus builds from source when no prebuilt binary can be fetched.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build
RUN npm prune --omit=dev --no-audit --no-fund

FROM node:24-trixie-slim
# tini as PID 1: it forwards SIGTERM to the gateway once (which then drains) and reaps children.
# The usage journal lives on a volume so the root filesystem can be read-only; uid 1000 is the
# base image's "node" user (numeric, so Kubernetes' runAsNonRoot can check it).
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/* && install -d -o 1000 -g 1000 /var/lib/speech-gateway/usage-journal
WORKDIR /app
ENV NODE_ENV=production PORT=8080 ADMIN_PORT=9090 USAGE_JOURNAL_DIR=/var/lib/speech-gateway/usage-journal
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
VOLUME ["/var/lib/speech-gateway/usage-journal"]
USER 1000:1000
EXPOSE 8080 9090
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# The same command as package.json's start:prod (a test keeps them equal). A 1 MB young-generation
# semi-space: V8 grows it to 16 MB under load, memory that a gateway of mostly idle sockets keeps.
CMD ["node", "--max-semi-space-size=1", "dist/src/main.js"]
