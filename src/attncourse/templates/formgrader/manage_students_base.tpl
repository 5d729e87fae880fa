{%- extends 'course_base.tpl' -%}
{%- set page = 'students' -%}
{%- block title -%}
学生
{%- endblock -%}
