"""The benchmarks of infra/bench-*.sh as Python programs (standard library only; boto3 where S3
is spoken). The shell scripts install what is missing and run `python3 -m infra.bench.NAME`.

common      processes, ports, waits, arguments, /proc readings, the gateway and MinIO
cache       infra/bench-cache.sh: the gateway's block cache against nginx and MinIO
mount       infra/bench-mount.sh: the drive against bindfs, rclone mount and s3fs
admin_users infra/bench-admin-users.sh: the console's user list at 10,000 users
nimbus      infra/bench-nimbus.sh: one `nimbus bench` run with every target
"""
