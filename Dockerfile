# usersync's container image: a static binary (no cgo) on a distroless base,
# run as a non-root user, data dir as a volume, listening on 8080.
#   docker build -t usersync .
# The binary is built by scripts/build.sh, as CI builds it.

FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN ./scripts/build.sh /out/usersync && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/usersync /usr/local/bin/usersync
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV USERSYNC_ADDR=:8080 \
    USERSYNC_DATA_DIR=/data
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/usersync"]
