"""Secrets given on a command line, in the forms common tools take them, are redacted in what an approval
request shows; look-alike options that carry no secret are left as they are."""

from __future__ import annotations

import pytest

from pisces.core.approval.redact import redact_text

SECRET = "hunter2Zq"

LEAKS = [
    f"curl -u alice:{SECRET} https://x", f"curl --user 'alice:{SECRET}' https://x", f"curl -ualice:{SECRET} x",
    f"curl -sS --proxy-user bob:{SECRET} -x p https://x", f"curl -H 'Authorization: Basic {SECRET}' x",
    f"curl -H \"X-Api-Key: {SECRET}\" x", f"http -a alice:{SECRET} GET x", f"xh --auth alice:{SECRET} x",
    f"mysql -u root -p{SECRET} db", f"mysqldump -uroot -p'{SECRET}' db", f"mysql --password={SECRET} db",
    f"MYSQL_PWD={SECRET} mysql -u root", f"mariadb -u root -p{SECRET}",
    f"psql postgresql://bob:{SECRET}@db/x", f"PGPASSWORD={SECRET} psql -h x", f"psql 'host=h password={SECRET}'",
    f"sshpass -p {SECRET} ssh host", f"sshpass -p{SECRET} ssh h", f"sshpass -p '{SECRET}' scp a h:",
    f"redis-cli -a {SECRET} ping", f"redis-cli -h x --pass {SECRET}", f"redis-cli -u redis://:{SECRET}@h:6379",
    f"redis-cli -u redis://u:{SECRET}@h", f"redis-cli auth {SECRET}", f"REDISCLI_AUTH={SECRET} redis-cli",
    f"aws configure set aws_secret_access_key {SECRET}", f"aws configure set aws_session_token {SECRET}",
    f"AWS_SECRET_ACCESS_KEY={SECRET} aws s3 ls", f"aws iam x --secret-access-key {SECRET}",
    f"az login -u me -p {SECRET}", f"az login --service-principal -u id -p {SECRET} --tenant t",
    f"az storage blob list --account-key {SECRET}", f"az x --connection-string 'AccountKey={SECRET};x=y'",
    f"gcloud sql users set-password root --password {SECRET}", f"gcloud x --access-token={SECRET}",
    f"docker login -u me -p {SECRET} r.io", f"helm repo add r u --password {SECRET}",
    f"openssl enc -pass pass:{SECRET}", f"ldapsearch -D cn=x -w {SECRET}", f"smbclient //h/s -U bob%{SECRET}",
    f"sqlcmd -S h -U sa -P {SECRET}", f"mongosh --username u -p {SECRET}",
    f"git clone https://u:{SECRET}@github.com/x", f"echo ok && curl -u a:{SECRET} x | jq .",
    f"aws --profile p configure set aws_secret_access_key {SECRET}", f"npm config set _authToken {SECRET}",
    f"az login -u me -p={SECRET}", f"echo {SECRET} | docker login -u me --password-stdin r.io",
    f"printf '{SECRET}' | helm registry login r --password-stdin -u me",
]

KEPT = ["mysql -u root -p db", "docker run -u 1000:1000 img", "ls -p dir", "curl -u alice https://x",
        "sshpass -f file ssh h", "redis-cli -h host ping", "aws s3 ls", "az login", "git log -p", "psql -h db x"]


@pytest.mark.parametrize("command", LEAKS)
def test_the_secret_of_each_form_is_redacted(command):
    out = redact_text(command)
    assert SECRET not in out and "[redacted]" in out, out


@pytest.mark.parametrize("command", KEPT)
def test_options_that_carry_no_secret_are_kept(command):
    assert redact_text(command) == command
